"""The dispatcher guard: what `ModelNew.forward` may run, enforced at PyTorch's dispatcher while it runs.

Every tensor operation forward asks of PyTorch passes through a `TorchDispatchMode`; the workspace's kernels are
ctypes calls and never do. The guard (1) records every op and, in strict mode, flags any that is not allocation,
a view or metadata; (2) hands out every allocation as a view into a larger buffer whose data is filled with a
poison pattern and whose margins are canaries; (3) flags ops that produce half-precision values in an fp32 task.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_Tensor = torch.Tensor
_empty = torch.empty
_uint8 = torch.uint8
_all = torch.all
_equal = torch.equal
_type = type

# Rationale: strict mode means all computation happens in the candidate's own kernels. Allocation, views and
# metadata are not computation; everything else (arithmetic, copies, reductions, matmuls, conversions) is.
ALLOWED_STRICT = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill_", "zero_", "scalar_tensor",
    "lift_fresh", "detach", "alias", "resize_", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset",
    "is_same_size", "_local_scalar_dense", "split", "split_with_sizes", "unbind", "chunk", "tensor_split",
    "_reshape_alias", "_unsafe_view", "view", "as_strided", "t", "transpose", "permute", "expand", "unsqueeze",
    "squeeze", "select", "slice", "narrow", "view_as", "unflatten", "flatten", "reshape", "movedim",
    "_has_compatible_shallow_copy_type", "is_contiguous", "set_", "record_stream",
})
ALLOCATION_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
FILLED_ALLOCATION_OPS = frozenset({
    "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full",
})
HALF_DTYPES = (torch.float16, torch.bfloat16)
CANARY_BYTE = 0xA5
# Poison for never-written memory: quiet NaNs with a payload no arithmetic produces, and odd integers.
_POISON_BITS = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float64: (torch.int64, 0x7FF8DEADBEEFDEAD),
    torch.float16: (torch.int16, 0x7E5B),
    torch.bfloat16: (torch.int16, 0x7FDB),
    torch.int32: (torch.int32, 0x5A5A5A5B),
    torch.int64: (torch.int64, 0x5A5A5A5A5A5A5A5B),
    torch.int16: (torch.int16, 0x5A5B),
}


def poison_pattern(dtype: torch.dtype) -> tuple[torch.dtype, int] | None:
    """(integer view dtype, bit pattern) that marks never-written memory of ``dtype``; None if none is defined."""
    return _POISON_BITS.get(dtype)


def poison_(tensor: torch.Tensor) -> None:
    """Fill ``tensor`` (contiguous storage) with the poison pattern of its dtype."""
    pattern = poison_pattern(tensor.dtype)
    if pattern is not None and tensor.numel():
        tensor.view(pattern[0]).fill_(pattern[1])


def count_poison(tensor: torch.Tensor) -> int:
    """How many elements of ``tensor`` still hold the poison pattern (were never written)."""
    pattern = poison_pattern(tensor.dtype)
    if pattern is None or tensor.numel() == 0:
        return 0
    view = tensor.contiguous().view(pattern[0])
    return int((view == pattern[1]).sum().item())


def _span(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(size, stride))


def _pad_elements(nbytes: int, element_size: int) -> int:
    pad_bytes = min(max(nbytes // 16, 4096), 4 << 20)
    pad_bytes = (pad_bytes + 511) // 512 * 512
    return pad_bytes // element_size


@dataclass
class PaddedBuffer:
    """A tensor handed out as a view into ``base``, with ``pad`` canary elements on each side."""

    name: str
    base: torch.Tensor
    pad: int
    span: int

    def canaries_intact(self) -> bool:
        raw = self.base.view(_uint8)
        esize = self.base.element_size()
        head = raw[: self.pad * esize]
        tail = raw[(self.pad + self.span) * esize:]
        return bool(_all(head == CANARY_BYTE).item()) and bool(_all(tail == CANARY_BYTE).item())


def padded_like(value: torch.Tensor, name: str, *, poison: bool) -> tuple[torch.Tensor, PaddedBuffer]:
    """A tensor with ``value``'s shape, strides, dtype and device, inside a canary-padded buffer; filled with
    ``value``'s data (poison=False) or with the poison pattern (poison=True)."""
    size, stride = tuple(value.shape), tuple(value.stride())
    span = _span(size, stride)
    pad = _pad_elements(max(span, 1) * value.element_size(), value.element_size())
    base = _empty(span + 2 * pad, dtype=value.dtype, device=value.device)
    base.view(_uint8).fill_(CANARY_BYTE)
    view = base.as_strided(size, stride, pad)
    if poison:
        poison_(base[pad:pad + span])
    elif span:
        view.copy_(value)
    return view, PaddedBuffer(name, base, pad, span)


@dataclass
class GuardReport:
    """What the guard saw during one forward call."""

    ops: dict[str, int] = field(default_factory=dict)
    forbidden: dict[str, int] = field(default_factory=dict)
    half_ops: dict[str, int] = field(default_factory=dict)
    buffers: list[PaddedBuffer] = field(default_factory=list)

    def broken_canaries(self) -> list[str]:
        return [b.name for b in self.buffers if not b.canaries_intact()]

    def release(self) -> None:
        """Drop the buffers once their canaries are read. A dispatch mode sits in a reference cycle, so a guard
        lives until the garbage collector runs; its buffers (forward's outputs, 6 GiB each for some KernelBench
        tasks) must not live that long."""
        self.buffers.clear()


class DispatchGuard(TorchDispatchMode):
    """Record, police and pad what forward asks of PyTorch. ``strict``: flag non-allocation, non-view ops.
    ``fp32_task``: flag ops whose outputs are fp16/bf16. ``pad``: canary-pad and poison allocations."""

    def __init__(self, *, strict: bool, fp32_task: bool, pad: bool = True) -> None:
        super().__init__()
        self.strict = strict
        self.fp32_task = fp32_task
        self.pad = pad
        self.report = GuardReport()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = func._overloadpacket.__name__
        full = f"aten.{name}"
        report = self.report
        report.ops[full] = report.ops.get(full, 0) + 1
        if self.strict and name not in ALLOWED_STRICT and not func.is_view:
            report.forbidden[full] = report.forbidden.get(full, 0) + 1
        out = func(*args, **kwargs)
        if self.fp32_task:
            for value in (out if isinstance(out, (tuple, list)) else (out,)):
                if _type(value) is _Tensor and value.dtype in HALF_DTYPES:
                    report.half_ops[full] = report.half_ops.get(full, 0) + 1
        if self.pad and _type(out) is _Tensor and (name in ALLOCATION_OPS or name in FILLED_ALLOCATION_OPS):
            # Rationale: stale allocator output. A freshly allocated tensor is filled with a poison pattern, so an
            # output the kernels never wrote is visible as such instead of holding an old result the allocator
            # happened to hand back; the canary margins expose writes past the end (or before the start).
            padded, record = padded_like(out, f"{full}#{len(report.buffers)}", poison=name in ALLOCATION_OPS)
            report.buffers.append(record)
            return padded
        return out
