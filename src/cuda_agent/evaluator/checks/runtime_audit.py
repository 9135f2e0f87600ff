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

_LOW_PRECISION_KERNEL = re.compile(r"tf32|bf16|f16|fp16|half|hmma|h884|h1688|h16816|s16816", re.IGNORECASE)
_TORCH_KERNEL = re.compile(r"at::native|at_cuda_detail|elementwise_kernel|reduce_kernel|triton_|cunn_|"
                           r"vectorized_elementwise|unrolled_elementwise|softmax_warp|cutlass::Kernel.*at::",
                           re.IGNORECASE)
_ALLOWED_TORCH_KERNEL = re.compile(r"Fill|fill_kernel|zero_", re.IGNORECASE)


def _attr(kernel: Any, *names: str) -> Any:
    for name in names:
        if hasattr(kernel, name):
            return getattr(kernel, name)
    return None


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
    hits: list[tuple[str, str]] = []
    current = torch.cuda.current_stream().cuda_stream
    own = tuple(cand.kernel_names)
    own_launched = []
    for kernel in kernels:
        name = str(_attr(kernel, "name") or "")
        stream = _attr(kernel, "stream", "stream_id")
        is_own = any(k in name for k in own)
        if is_own:
            own_launched.append(name)
        # Rationale: work on another stream is invisible to event timers and may still be running when the
        # checker reads the output; kernels must run on ca::stream(), the caller's current stream.
        if stream is not None and _streams_differ(stream, current, kernel):
            hits.append(("foreign_stream", f"kernel {name[:80]} ran on stream {stream}"))
        # Rationale: strict mode forbids PyTorch compute, also when forward hides it from the dispatcher guard.
        if strict and not is_own and _TORCH_KERNEL.search(name) and not _ALLOWED_TORCH_KERNEL.search(name):
            hits.append(("torch_compute_in_forward", f"PyTorch kernel {name[:80]} ran in forward"))
        # Rationale: tensor-core fp16/bf16/TF32 kernels in an fp32 task compute in lower precision.
        if fp32_task and _LOW_PRECISION_KERNEL.search(name):
            hits.append(("lowered_precision", f"kernel {name[:80]} computes in reduced precision"))
    # Rationale: decoy kernels. Sources that define kernels none of which runs mean the work happens elsewhere.
    if own and not own_launched:
        hits.append(("decoy_kernel", f"none of the kernels defined in the sources ({', '.join(own[:6])}) was "
                                     "launched by forward"))
    if not kernels:
        notes.append("run-time kernel audit: the profiler recorded no kernels")
    return hits


def _streams_differ(stream: Any, current: int, kernel: Any) -> bool:
    """Compare a recorded stream with the caller's: a handle (pointer) or a profiler stream id."""
    is_current = _attr(kernel, "on_current_stream", "is_current_stream")
    if isinstance(is_current, bool):
        return not is_current
    if isinstance(stream, int) and stream == current:
        return False
    # profiler stream ids: the legacy default stream is 7 (CUPTI), the caller's current stream is reported as such
    return isinstance(stream, int) and stream not in (current, 0, 7)
