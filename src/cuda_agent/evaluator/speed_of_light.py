"""The hardware floor of a task: the fewest milliseconds its arithmetic and its memory traffic can take here.

Why: a candidate timed faster than physics allows is cheating the timer somehow, even in a way nobody has listed
yet; and the fraction of the floor a correct kernel reaches tells the agent how much room is left.

The floor is a lower bound, so every choice errs low: peaks are dense datasheet peaks at boost clock; an fp32
matrix product may use the fastest fp32-accurate tensor-core path (three TF32 passes, or nine BF16 passes, as
CUTLASS and newer cuBLAS do), or the TF32 peak itself where PyTorch's backend flags allow TF32 (its default for
convolutions: the evaluator should turn both flags off for fp32 tasks to make the floor sharper); only the bytes that the reference actually touched are counted, each once; floating
point operations are those PyTorch's FLOP counter sees (matrix products, convolutions, attention), plus one per
output element for everything else (so memory-bound tasks do not get a zero floor).
"""
from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterable, Sequence

import torch

log = logging.getLogger(__name__)

_MIB = 1 << 20


@dataclass(frozen=True)
class GpuSpec:
    """Peak dense throughput (TFLOP/s), memory bandwidth (GB/s) and L2 size of one GPU model."""

    name: str
    sm_count: int
    peak_fp32_tflops: float
    peak_tf32_tflops: float
    peak_fp16_tflops: float
    peak_bf16_tflops: float
    mem_bandwidth_gbs: float
    l2_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# (pattern on the lower-cased device name, spec). First match wins: more specific names come first.
_TABLE: tuple[tuple[str, GpuSpec], ...] = (
    (r"gh200", GpuSpec("NVIDIA GH200", 132, 67.0, 494.7, 989.4, 989.4, 4900.0, 50 * _MIB)),
    (r"h200\s*nvl", GpuSpec("NVIDIA H200 NVL", 132, 60.0, 417.5, 835.5, 835.5, 4800.0, 50 * _MIB)),
    (r"h200", GpuSpec("NVIDIA H200 SXM", 132, 67.0, 494.7, 989.4, 989.4, 4800.0, 50 * _MIB)),
    (r"h100\s*nvl", GpuSpec("NVIDIA H100 NVL", 132, 60.0, 417.5, 835.5, 835.5, 3900.0, 50 * _MIB)),
    (r"h100\s*pcie", GpuSpec("NVIDIA H100 PCIe", 114, 51.2, 378.0, 756.0, 756.0, 2000.0, 50 * _MIB)),
    (r"h100|h800", GpuSpec("NVIDIA H100 SXM", 132, 67.0, 494.7, 989.4, 989.4, 3350.0, 50 * _MIB)),
    (r"\bh20\b", GpuSpec("NVIDIA H20", 78, 44.0, 74.0, 148.0, 148.0, 4000.0, 60 * _MIB)),
    (r"b200|gb200", GpuSpec("NVIDIA B200", 148, 90.0, 1200.0, 2500.0, 2500.0, 8000.0, 126 * _MIB)),
    (r"a100.*40\s*gb", GpuSpec("NVIDIA A100 40GB", 108, 19.5, 156.0, 312.0, 312.0, 1555.0, 40 * _MIB)),
    (r"a100|a800", GpuSpec("NVIDIA A100 80GB", 108, 19.5, 156.0, 312.0, 312.0, 2039.0, 40 * _MIB)),
    (r"l40s", GpuSpec("NVIDIA L40S", 142, 91.6, 183.0, 362.1, 362.1, 864.0, 96 * _MIB)),
    (r"\bl40\b", GpuSpec("NVIDIA L40", 142, 90.5, 90.5, 181.0, 181.0, 864.0, 96 * _MIB)),
    (r"\bl4\b", GpuSpec("NVIDIA L4", 58, 30.3, 60.0, 121.0, 121.0, 300.0, 48 * _MIB)),
    (r"a10g", GpuSpec("NVIDIA A10G", 80, 35.0, 70.0, 140.0, 140.0, 600.0, 6 * _MIB)),
    (r"\ba10\b", GpuSpec("NVIDIA A10", 72, 31.2, 62.5, 125.0, 125.0, 600.0, 6 * _MIB)),
    (r"rtx\s*6000\s*ada", GpuSpec("NVIDIA RTX 6000 Ada", 142, 91.1, 182.1, 364.2, 364.2, 960.0, 96 * _MIB)),
    (r"rtx\s*a6000", GpuSpec("NVIDIA RTX A6000", 84, 38.7, 77.4, 154.8, 154.8, 768.0, 6 * _MIB)),
    (r"rtx\s*5090", GpuSpec("NVIDIA GeForce RTX 5090", 170, 104.8, 104.8, 419.0, 419.0, 1792.0, 96 * _MIB)),
    (r"rtx\s*4090", GpuSpec("NVIDIA GeForce RTX 4090", 128, 82.6, 82.6, 330.3, 330.3, 1008.0, 72 * _MIB)),
    (r"rtx\s*3090", GpuSpec("NVIDIA GeForce RTX 3090", 82, 35.6, 35.6, 142.0, 142.0, 936.0, 6 * _MIB)),
    (r"v100", GpuSpec("NVIDIA V100", 80, 15.7, 15.7, 125.0, 15.7, 900.0, 6 * _MIB)),
    (r"\bt4\b", GpuSpec("NVIDIA T4", 40, 8.1, 8.1, 65.0, 8.1, 320.0, 4 * _MIB)),
)


def spec_for_name(name: str) -> GpuSpec | None:
    """The table's spec for a device name such as ``NVIDIA H200`` or ``NVIDIA A100-SXM4-80GB``; None if unknown."""
    lowered = name.lower()
    for pattern, spec in _TABLE:
        if re.search(pattern, lowered):
            return spec
    return None


def cpu_spec() -> GpuSpec:
    """A deliberately generous stand-in for a CPU (0.2 TFLOP/s and 20 GB/s per core, 32 MiB "L2"): lets the floor
    logic run in CPU tests; its floors are far below what a CPU reaches, so nothing honest is flagged."""
    cores = os.cpu_count() or 1
    fp32 = 0.2 * cores
    return GpuSpec("cpu", cores, fp32, fp32, 2 * fp32, 2 * fp32, 20.0 * cores, 32 * _MIB)


def _spec_from_properties(props: Any) -> GpuSpec:
    """Estimate a spec for a GPU missing from the table, erring high (so the floor errs low)."""
    sms = int(props.multi_processor_count)
    clock_ghz = float(getattr(props, "clock_rate", 0) or 2_000_000) / 1e6
    fp32 = sms * 128 * 2 * clock_ghz / 1e3
    mem_khz = float(getattr(props, "memory_clock_rate", 0) or 0)
    bus_bits = float(getattr(props, "memory_bus_width", 0) or 0)
    bandwidth = 2 * mem_khz * 1e3 * bus_bits / 8 / 1e9 if mem_khz and bus_bits else 10_000.0
    return GpuSpec(
        name=str(props.name), sm_count=sms, peak_fp32_tflops=fp32, peak_tf32_tflops=8 * fp32,
        peak_fp16_tflops=16 * fp32, peak_bf16_tflops=16 * fp32, mem_bandwidth_gbs=1.5 * bandwidth,
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
    )


def gpu_spec(device: torch.device | int | str | None = None) -> GpuSpec:
    """The spec of ``device`` (the current CUDA device by default): from the table where the name is known, with
    the SM count and L2 size the device reports; estimated from its properties otherwise; `cpu_spec` without CUDA."""
    if not torch.cuda.is_available() or (isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu"):
        return cpu_spec()
    props = torch.cuda.get_device_properties(device if device is not None else torch.cuda.current_device())
    spec = spec_for_name(str(props.name))
    if spec is None:
        log.info("speed of light: %s is not in the table; estimating peaks from device properties", props.name)
        return _spec_from_properties(props)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0) or spec.l2_bytes
    return replace(spec, name=str(props.name), sm_count=int(props.multi_processor_count), l2_bytes=l2)


@dataclass(frozen=True)
class SolEstimate:
    """The floor of one task on one GPU. ``flops`` = matrix-class FLOPs + one op per output element;
    ``min_bytes`` = bytes of inputs and parameters read (once) + outputs written (once); times in ms;
    ``bound`` is ``compute`` or ``memory``."""

    flops: float
    min_bytes: float
    compute_ms: float
    memory_ms: float
    floor_ms: float
    bound: str
    matmul_flops: float = 0.0
    elementwise_ops: float = 0.0
    dtype: str = "float32"
    gpu: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SolEstimate":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


_REDUCED = (torch.float16, torch.bfloat16)


def matmul_peak_tflops(spec: GpuSpec, dtype: torch.dtype, allow_tf32: bool = False) -> float:
    """Fastest rate at which a matrix product (or convolution) in ``dtype`` can run at that dtype's accuracy; with
    ``allow_tf32`` (PyTorch's backend flags allow TF32 for that op class) an fp32 product may run at the TF32 peak."""
    if dtype == torch.float16:
        return spec.peak_fp16_tflops
    if dtype == torch.bfloat16:
        return max(spec.peak_bf16_tflops, spec.peak_fp16_tflops)
    if dtype.is_floating_point or dtype.is_complex:
        if allow_tf32:
            return max(spec.peak_fp32_tflops, spec.peak_tf32_tflops)
        return max(spec.peak_fp32_tflops, spec.peak_tf32_tflops / 3.0, spec.peak_bf16_tflops / 9.0)
    return max(spec.peak_fp16_tflops, spec.peak_bf16_tflops)


def tf32_flags() -> tuple[bool, bool]:
    """(matrix products, convolutions): whether PyTorch's backend flags in this process allow TF32 for fp32."""
    return bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32)


def elementwise_peak_tflops(spec: GpuSpec, dtype: torch.dtype) -> float:
    """Rate of plain arithmetic on CUDA cores (packed two-wide for 16-bit types)."""
    return 2.0 * spec.peak_fp32_tflops if dtype in _REDUCED else spec.peak_fp32_tflops


def _tensors(obj: Any) -> list[torch.Tensor]:
    leaves, _ = torch.utils._pytree.tree_flatten(obj)
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def _view_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _infer_dtype(tensors: Iterable[torch.Tensor]) -> torch.dtype:
    weight: dict[torch.dtype, int] = {}
    for t in tensors:
        if t.is_floating_point():
            weight[t.dtype] = weight.get(t.dtype, 0) + t.numel()
    return max(weight, key=lambda d: weight[d]) if weight else torch.float32


_NO_READ = frozenset({
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like", "randint_like", "new_empty",
    "new_zeros", "new_ones", "new_full", "new_empty_strided", "detach", "alias", "lift_fresh", "resize_",
})


def _make_tracker(watched: dict[tuple[str, int], int]) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class _ReadTracker(TorchDispatchMode):
        """Records, per watched storage, the largest span any computing op read from it."""

        def __init__(self) -> None:
            super().__init__()
            self.read: dict[tuple[str, int], int] = {}

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if not getattr(func, "is_view", False) and func.__name__.split(".")[0] not in _NO_READ:
                for t in _tensors((args, kwargs)):
                    key = _storage_key(t)
                    if key in watched:
                        self.read[key] = max(self.read.get(key, 0), min(_view_bytes(t), watched[key]))
            return func(*args, **kwargs)

    return _ReadTracker()


def _conv_flops(counter: Any) -> float:
    counts = counter.get_flop_counts().get("Global", {})
    return float(sum(v for op, v in counts.items() if "convolution" in str(op)))


def _bytes_read(model: Any, inputs: Sequence[Any]) -> tuple[Any, float, float, float]:
    """Run ``model`` once under the FLOP counter and the read tracker:
    (outputs, all counted FLOPs, convolution FLOPs among them, bytes read)."""
    from torch.utils.flop_counter import FlopCounterMode

    sources = _tensors(list(inputs))
    if isinstance(model, torch.nn.Module):
        sources += list(model.parameters()) + list(model.buffers())
    watched: dict[tuple[str, int], int] = {}
    for t in sources:
        key = _storage_key(t)
        watched[key] = max(watched.get(key, 0), _view_bytes(t))
    counter = FlopCounterMode(display=False)
    tracker = _make_tracker(watched)
    with torch.no_grad():
        try:
            with counter, tracker:
                outputs = model(*inputs)
            read = float(sum(tracker.read.values()))
        except Exception as exc:  # an op the tracker cannot pass through: count everything once instead
            log.warning("speed of light: read tracking failed (%s); counting every input and parameter", exc)
            counter = FlopCounterMode(display=False)
            with counter:
                outputs = model(*inputs)
            read = float(sum(watched.values()))
    return outputs, float(counter.get_total_flops()), _conv_flops(counter), read


def estimate(
    model: Any,
    inputs: Sequence[Any],
    outputs: Any,
    spec: GpuSpec,
    dtype: torch.dtype | None = None,
    *,
    allow_tf32: tuple[bool, bool] | None = None,
) -> SolEstimate:
    """The floor of ``model(*inputs)`` on ``spec``. Runs the reference once (under PyTorch's FLOP counter and a
    read tracker). ``outputs`` are the reference's outputs (None: those of this run). ``dtype``: the task's
    precision (default: the floating dtype holding most input and parameter elements). ``allow_tf32``: whether
    fp32 (matrix products, convolutions) may run as TF32, as PyTorch's backend flags say (default: read them now;
    PyTorch allows TF32 convolutions by default). Matrix-class work is summed (it shares the tensor cores);
    elementwise work may overlap with it. Errors from the model propagate."""
    mm_tf32, conv_tf32 = allow_tf32 if allow_tf32 is not None else tf32_flags()
    produced, mm_flops, conv_flops, read_bytes = _bytes_read(model, inputs)
    outs = _tensors(outputs if outputs is not None else produced)
    if dtype is None:
        params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
        dtype = _infer_dtype(_tensors(list(inputs)) + params)
    input_keys = {_storage_key(t) for t in _tensors(list(inputs))}
    written: dict[tuple[str, int], int] = {}
    for t in outs:
        key = _storage_key(t)
        if key not in input_keys:
            written[key] = max(written.get(key, 0), _view_bytes(t))
    ew_ops = float(sum(t.numel() for t in outs))
    min_bytes = read_bytes + float(sum(written.values()))
    mm_ms = (mm_flops - conv_flops) / (matmul_peak_tflops(spec, dtype, mm_tf32) * 1e9)
    mm_ms += conv_flops / (matmul_peak_tflops(spec, dtype, conv_tf32) * 1e9)
    ew_ms = ew_ops / (elementwise_peak_tflops(spec, dtype) * 1e9)
    compute_ms = max(mm_ms, ew_ms)
    memory_ms = min_bytes / (spec.mem_bandwidth_gbs * 1e6)
    floor_ms = max(compute_ms, memory_ms)
    return SolEstimate(
        flops=mm_flops + ew_ops, min_bytes=min_bytes, compute_ms=compute_ms, memory_ms=memory_ms,
        floor_ms=floor_ms, bound="compute" if compute_ms >= memory_ms else "memory", matmul_flops=mm_flops,
        elementwise_ops=ew_ops, dtype=str(dtype).removeprefix("torch."), gpu=spec.name,
    )


def fraction_of_floor(candidate_ms: float, sol: SolEstimate) -> float:
    """``floor / candidate``: 1.0 at the hardware floor, 0.1 at ten times slower; above 1 means faster than
    physics allows. Infinity for a non-positive time."""
    if candidate_ms <= 0 or math.isnan(candidate_ms):
        return math.inf
    return sol.floor_ms / candidate_ms
