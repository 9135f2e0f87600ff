"""Run-time kernel audit (GPU): which kernels a forward call actually launched, on which streams.

Built on `cuda_agent.evaluator.profile.launched_kernels` (CUPTI through torch.profiler). The dispatcher guard sees
what forward asks of PyTorch; this audit sees what the GPU ran, including work PyTorch never knew about.
"""
from __future__ import annotations

import logging
import re
from typing import Any

import torch

log = logging.getLogger(__name__)

_ALLOWED_TORCH_KERNEL = re.compile(r"fill|zero_|aten::(empty|zeros|ones|full)", re.IGNORECASE)


def audit_kernels(model: torch.nn.Module, inputs: list[Any], *, cand: Any, strict: bool, fp32_task: bool,
                  notes: list[str]) -> list[tuple[str, str]]:
    """(rule, detail) pairs for what one unguarded forward call launched; [] with a note when the profiler is
    unavailable."""
    try:
        from cuda_agent.evaluator.profile import launched_kernels
    except ImportError as exc:
        notes.append(f"run-time kernel audit skipped: {exc}")
        return []
    try:
        with torch.no_grad():
            kernels = launched_kernels(model, inputs)
    except Exception as exc:  # noqa: BLE001 - the profiler failing is not the candidate's fault
        notes.append(f"run-time kernel audit skipped: the profiler failed: {type(exc).__name__}: {exc}"[:300])
        return []
    if not kernels:
        notes.append("run-time kernel audit: the profiler recorded no kernels")
    hits: list[tuple[str, str]] = []
    own = tuple(cand.kernel_names)
    own_launched = []
    for kernel in kernels:
        name = str(kernel.name)
        kind = str(getattr(kernel, "kind", "other"))
        launched_by = str(getattr(kernel, "launched_by", "") or "")
        is_own = any(k in name for k in own)
        if is_own:
            own_launched.append(name)
        # Rationale: work on another stream is invisible to event timers and may still be running when the
        # checker reads the output; kernels must run on ca::stream(), the caller's current stream.
        if not getattr(kernel, "on_caller_stream", True):
            hits.append(("foreign_stream", f"kernel {name[:80]} ran on stream {getattr(kernel, 'stream', '?')}, "
                                           "not the caller's"))
        # Rationale: strict mode forbids PyTorch compute, also when forward hides it from the dispatcher guard;
        # cuBLAS/cuDNN count as the candidate's only when its own C++ launched them (no PyTorch op above them).
        torch_launched = launched_by.startswith("aten::") and not _ALLOWED_TORCH_KERNEL.search(launched_by)
        if strict and not is_own and (kind == "pytorch" or torch_launched) and not _ALLOWED_TORCH_KERNEL.search(name):
            hits.append(("torch_compute_in_forward", f"PyTorch kernel {name[:80]} ran in forward"
                                                     + (f" (from {launched_by})" if launched_by else "")))
        # Rationale: tensor-core fp16/bf16/TF32 kernels in an fp32 task compute in lower precision.
        if fp32_task and kind == "reduced_precision":
            hits.append(("lowered_precision", f"kernel {name[:80]} computes in reduced precision"))
    # Rationale: decoy kernels. Sources that define kernels none of which runs mean the work happens elsewhere.
    if own and not own_launched:
        hits.append(("decoy_kernel", f"none of the kernels defined in the sources ({', '.join(own[:6])}) was "
                                     "launched by forward"))
    return hits
