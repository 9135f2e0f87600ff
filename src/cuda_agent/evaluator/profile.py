"""What actually ran on the GPU: every kernel launched during a call, with its stream, grid and time.

Why: source inspection can be fooled (a decoy kernel compiled but never launched, work hidden on another stream,
a PyTorch op called through a side door); the CUDA profiling interface (CUPTI, through ``torch.profiler``) records
every kernel the process launches, whichever library launched it, including ones loaded with ``ctypes``. The
evaluator audits these records, and the agent may see a per-kernel time breakdown of its candidate and of the
compiled baseline.

Kernel names are classified by where they come from (`classify_kernel`). Names are a hint, not proof: the agent
names its own kernels, so the evaluator pairs these classes with numerical probes.
"""
from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.profiler

from cuda_agent.errors import VerificationError
from cuda_agent.evaluator import timing

log = logging.getLogger(__name__)

_profile_cls = torch.profiler.profile
_ProfilerActivity = torch.profiler.ProfilerActivity

KERNEL_CLASSES = ("pytorch", "cublas", "cudnn", "reduced_precision", "other")


class ProfilingUnavailable(VerificationError):
    """The profiler recorded no GPU kernels at all: no CUDA device, or CUPTI unavailable in this process."""


@dataclass(frozen=True)
class LaunchedKernel:
    """One kernel execution. ``stream``: the CUPTI stream id; ``on_caller_stream``: whether that is the stream
    current when the call began; ``launched_by``: the PyTorch operator that launched it, if any (``aten::mm``)."""

    name: str
    stream: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    duration_us: float
    on_caller_stream: bool = True
    launched_by: str = ""

    @property
    def kind(self) -> str:
        return classify_kernel(self.name)

    @property
    def on_current_stream(self) -> bool:
        """Alias of ``on_caller_stream`` (the caller's current stream when the call began)."""
        return self.on_caller_stream


@dataclass(frozen=True)
class KernelTime:
    """Time of one kernel name per forward call: ``total_us`` summed over its ``calls`` launches."""

    name: str
    total_us: float
    calls: int


@dataclass(frozen=True)
class LaunchAudit:
    """Kernels launched by one call, in start order, and the CUPTI id of the caller's stream."""

    kernels: tuple[LaunchedKernel, ...]
    caller_stream: int


# --- classification ---------------------------------------------------------------------------------------------

_REDUCED = re.compile(
    r"c10::half|c10::bfloat16|__half|\bhalf2?\b|__nv_bfloat|nv_bfloat16|cutlass::half_t|cutlass::bfloat16_t"
    r"|cutlass::tfloat32_t|tfloat32|bf16|fp16|f16|tf32|fp8|e4m3|e5m2|(?<!u)int8|imma"
    r"|nvjet_(?:sm\d+_)?[a-z]{0,2}[hbt][a-z]{0,2}_"
    r"|(?<![a-z0-9])[hs](?:884|1688|16816|16832|8816)(?:gemm|tf32|bf16)?"
    r"|xmma_gemm_h|hgemm|bgemm",
    re.IGNORECASE,
)
_CUDNN = re.compile(
    r"cudnn|xmma_fprop|xmma_dgrad|xmma_wgrad|implicit_convolve|explicit_convolve|precomputed_convolve"
    r"|winograd|fft2d_|fft_r2c|fft_c2r|nchwtonhwc|nhwctonchw|conv2d_grouped_direct|convolve_|cask_cudnn|dgrad|wgrad",
    re.IGNORECASE,
)
_CUBLAS = re.compile(
    r"cublas|(?<![a-z])(?:ampere|volta|turing|maxwell|hopper|sm\d{2,3})_[a-z0-9]*gemm|sm\d{2,3}_xmma_gemm|xmma_gemm"
    r"|gemv2[nt]_kernel|gemvnsp|gemmk1_kernel|gemmsn_|splitkreduce_kernel|nvjet_|cutlass_\d{2}_|cutlass_tensorop"
    r"|cutlass_simt|dot_kernel|scal_kernel|axpy_kernel|gemv_kernel|gemm_kernel_|batched_gemm|\bsgemm|\bdgemm",
    re.IGNORECASE,
)
_PYTORCH = re.compile(
    r"at::native|at::cuda|at_cuda_detail|\baten\b|c10::|triton_|softmax_warp_|cunn_|pytorchmemeffattention"
    r"|pytorch_flash|fmha_cutlass|flash_fwd|flash_bwd|vectorized_elementwise_kernel|unrolled_elementwise_kernel"
    r"|elementwise_kernel<|reduce_kernel<|index_elementwise_kernel|catarraybatchedcopy|distribution_elementwise",
    re.IGNORECASE,
)


def kernel_origin(name: str) -> str:
    """Where a kernel comes from, ignoring its precision: ``cudnn``, ``cublas``, ``pytorch`` or ``other``."""
    if _CUDNN.search(name):
        return "cudnn"
    if _CUBLAS.search(name):
        return "cublas"
    if _PYTORCH.search(name):
        return "pytorch"
    return "other"


def is_reduced_precision(name: str) -> bool:
    """Whether the name shows a 16-bit, TF32, FP8 or int8 variant (``c10::Half``, ``__half``, ``bf16``, ``tf32``,
    tensor-core tile codes such as ``h884``/``s16816``)."""
    return bool(_REDUCED.search(name))


def classify_kernel(name: str) -> str:
    """One of `KERNEL_CLASSES`: ``reduced_precision`` wins (it matters for fp32 tasks whoever launched the kernel);
    otherwise ``cudnn``, ``cublas``, ``pytorch`` (ATen, its CUDA helpers and inductor's ``triton_*`` kernels) or
    ``other`` (the candidate's own kernels)."""
    if is_reduced_precision(name):
        return "reduced_precision"
    return kernel_origin(name)


# --- recording --------------------------------------------------------------------------------------------------

_MARKER_NAME = re.compile(r"fill", re.IGNORECASE)


def _trace_events(fn: Callable[..., Any], inputs: Sequence[Any], reps: int, device: torch.device) -> list[dict[str, Any]]:
    """Run a marker kernel and then ``fn`` ``reps`` times under the profiler; return the trace's events."""
    if device.type != "cuda" or not torch.cuda.is_available():
        raise ProfilingUnavailable("profile: kernel recording needs a CUDA device; the inputs are not on one")
    marker = torch.zeros(1, device=device)
    timing._cuda_synchronize()
    activities = [_ProfilerActivity.CPU, _ProfilerActivity.CUDA]
    with _profile_cls(activities=activities) as prof:
        with torch.no_grad():
            marker.fill_(1.0)
            for _ in range(reps):
                out = fn(*inputs)
                del out
            timing._cuda_synchronize()
    with tempfile.TemporaryDirectory(prefix="cuda_agent_prof_") as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as fh:
            data = json.load(fh)
    events = data.get("traceEvents", data) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)]


def _triple(value: Any) -> tuple[int, int, int]:
    if isinstance(value, (list, tuple)) and len(value) == 3:
        return int(value[0]), int(value[1]), int(value[2])
    return (0, 0, 0)


def _kernels_from_trace(events: list[dict[str, Any]]) -> LaunchAudit:
    ops: dict[Any, str] = {}
    for e in events:
        if e.get("cat") in ("cpu_op", "operator") and "args" in e:
            ext = e["args"].get("External id")
            if ext is not None:
                ops.setdefault(ext, str(e.get("name", "")))
    raw = [e for e in events if e.get("cat") == "kernel" and e.get("ph", "X") == "X"]
    if not raw:
        raise ProfilingUnavailable(
            "profile: the profiler recorded no GPU kernels, not even its own marker; CUPTI may be unavailable "
            "in this process (check the driver and that no other profiler is attached)"
        )
    raw.sort(key=lambda e: (e.get("args", {}).get("correlation", 0), float(e.get("ts", 0))))
    fills = [e for e in raw if _MARKER_NAME.search(str(e.get("name", "")))]
    marker = fills[0] if fills else raw[0]
    caller_stream = int(marker.get("args", {}).get("stream", marker.get("tid", -1)))
    kernels = []
    for e in sorted((e for e in raw if e is not marker), key=lambda e: float(e.get("ts", 0))):
        args = e.get("args", {})
        stream = int(args.get("stream", e.get("tid", -1)))
        kernels.append(LaunchedKernel(
            name=str(e.get("name", "")), stream=stream, grid=_triple(args.get("grid")),
            block=_triple(args.get("block")), duration_us=float(e.get("dur", 0.0)),
            on_caller_stream=stream == caller_stream, launched_by=ops.get(args.get("External id"), ""),
        ))
    return LaunchAudit(tuple(kernels), caller_stream)


def _device_of(inputs: Sequence[Any]) -> torch.device:
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "cuda":
            return x.device
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")


def audit_launches(fn: Callable[..., Any], inputs: Sequence[Any]) -> LaunchAudit:
    """Call ``fn(*inputs)`` once under the profiler; return its kernels and the caller's stream id.

    Raises:
        ProfilingUnavailable: no CUDA device, or the profiler saw no kernel at all.
        Anything ``fn`` raises.
    """
    return _kernels_from_trace(_trace_events(fn, inputs, 1, _device_of(inputs)))


def launched_kernels(fn: Callable[..., Any], inputs: Sequence[Any]) -> list[LaunchedKernel]:
    """Every kernel executed while ``fn(*inputs)`` ran once (and until the device was synchronised after it), in
    start order, from any stream or library. Raises like `audit_launches`."""
    return list(audit_launches(fn, inputs).kernels)


def kernel_breakdown(fn: Callable[..., Any], inputs: Sequence[Any], reps: int = 3) -> list[KernelTime]:
    """Per-kernel time of one forward call, averaged over ``reps`` profiled calls after one warm-up call, slowest
    first. Raises like `audit_launches`; ValueError if ``reps`` < 1."""
    if reps < 1:
        raise ValueError(f"kernel_breakdown: reps must be >= 1, got {reps}")
    with torch.no_grad():
        fn(*inputs)
    audit = _kernels_from_trace(_trace_events(fn, inputs, reps, _device_of(inputs)))
    totals: dict[str, list[float]] = {}
    for k in audit.kernels:
        entry = totals.setdefault(k.name, [0.0, 0.0])
        entry[0] += k.duration_us
        entry[1] += 1
    rows = [KernelTime(name, total / reps, max(1, round(count / reps))) for name, (total, count) in totals.items()]
    return sorted(rows, key=lambda r: r.total_us, reverse=True)


def breakdown_rows(fn: Callable[..., Any], inputs: Sequence[Any], reps: int = 3) -> tuple[dict[str, Any], ...]:
    """`kernel_breakdown` as plain rows (``name``, ``total_us``, ``calls``), the form results store and
    `format_breakdown_rows` reads. Raises like `kernel_breakdown`."""
    return tuple({"name": k.name, "total_us": k.total_us, "calls": k.calls} for k in kernel_breakdown(fn, inputs, reps))


def format_breakdown(rows: Sequence[KernelTime], top: int = 10, width: int = 90) -> str:
    """A small plain-text table for the agent: share, time per call, launches, class and (shortened) name."""
    total = sum(r.total_us for r in rows) or 1.0
    lines = [f"{'share':>6} {'us/call':>10} {'calls':>5}  {'class':<17} kernel"]
    for r in rows[:top]:
        name = r.name if len(r.name) <= width else r.name[: width - 3] + "..."
        lines.append(f"{100 * r.total_us / total:5.1f}% {r.total_us:10.2f} {r.calls:5d}  {classify_kernel(r.name):<17} {name}")
    if len(rows) > top:
        rest = sum(r.total_us for r in rows[top:])
        lines.append(f"{100 * rest / total:5.1f}% {rest:10.2f} {'':5}  ({len(rows) - top} more kernels)")
    return "\n".join(lines)


def format_breakdown_rows(rows: Sequence[Any], top: int = 10) -> str:
    """`format_breakdown` of a result's breakdown rows (mappings with ``name``, ``total_us``, ``calls``, as stored
    in ``EvalResult.kernel_breakdown`` and ``compile_kernel_breakdown``); rows that are not mappings are skipped;
    empty text when none is left."""
    kernels = [KernelTime(str(r.get("name", "?")), float(r.get("total_us") or 0.0), int(r.get("calls") or 0))
               for r in rows if isinstance(r, Mapping)]
    return format_breakdown(kernels, top=top) if kernels else ""
