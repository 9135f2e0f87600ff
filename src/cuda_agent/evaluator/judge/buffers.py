"""Shared buffers for the calls of one signature: a region per input tensor and per output tensor, each with
canary bytes on both sides.

A request of K calls uses K sets of one signature, the k-th call always the k-th set: the same buffers, offsets and
strides in every request (nothing about a call's memory says whether it is checked); the judge refills the inputs with fresh values before every call, poisons the outputs, and after
the call reads the outputs, checks the canaries (a write outside a tensor's bounds) and compares the inputs with its
private copy (a forward that mutated them).
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from cuda_agent.evaluator.judge.values import encode
from cuda_agent.evaluator.runner.shm import ALIGN, SharedRegion, dtype_name

CANARY = ALIGN
_POISON_BYTE = 0xFF  # NaN in every float format, -1 in every signed integer


@dataclass
class Slot:
    """One tensor in shared memory: the region, where the tensor lies in it, and the judge's view of it."""

    name: str
    region_id: int
    region: SharedRegion
    shape: tuple[int, ...]
    dtype: torch.dtype
    view: torch.Tensor
    canary: torch.Tensor  # the bytes expected on both sides of the tensor

    @property
    def nbytes(self) -> int:
        return self.view.numel() * self.view.element_size()

    def spec(self) -> list[Any]:
        strides = list(torch.empty(self.shape, device="meta").stride())
        return [self.region_id, CANARY, list(self.shape), strides, dtype_name(self.dtype)]

    def canary_intact(self) -> bool:
        flat = self.region.flat
        end = CANARY + self.nbytes
        return bool(torch.equal(flat[:CANARY], self.canary) and
                    torch.equal(flat[end:end + CANARY], self.canary))


def _slot(name: str, region_id: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Slot:
    item = torch.empty((), dtype=dtype).element_size()
    nbytes = max(1, int(torch.Size(shape).numel())) * item
    padded = CANARY + (nbytes + ALIGN - 1) // ALIGN * ALIGN + CANARY
    region = SharedRegion.create(padded, device)
    canary = torch.frombuffer(bytearray(os.urandom(CANARY)), dtype=torch.uint8).to(device)
    region.flat[:CANARY].copy_(canary)
    region.flat[CANARY + nbytes:CANARY + nbytes + CANARY].copy_(canary)
    strides = torch.empty(shape, device="meta").stride()
    view = region.view(CANARY, shape, strides, dtype)
    return Slot(name, region_id, region, tuple(shape), dtype, view, canary)


class BufferSet:
    """The shared buffers of one call signature (input shapes/dtypes/scalars and output leaves)."""

    def __init__(self, inputs: list[Any], outputs: list[tuple[str, Any]], device: torch.device,
                 ids: Iterator[int]) -> None:
        self.device = device
        self.inputs: list[Slot | None] = []
        self.scalars: list[Any] = []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                self.inputs.append(_slot(f"input {i}", next(ids), tuple(x.shape), x.dtype, device))
                self.scalars.append(None)
            else:
                self.inputs.append(None)
                self.scalars.append(x)
        self.outputs: list[Slot] = []
        self.output_paths: list[str] = []
        for path, value in outputs:
            if isinstance(value, torch.Tensor):
                self.outputs.append(_slot(path, next(ids), tuple(value.shape), value.dtype, device))
                self.output_paths.append(path)

    @property
    def regions(self) -> dict[int, SharedRegion]:
        return {s.region_id: s.region for s in [*self.inputs, *self.outputs] if s is not None}

    def matches(self, inputs: list[Any]) -> bool:
        """Whether ``inputs`` have this set's tensor shapes and dtypes."""
        if len(inputs) != len(self.inputs):
            return False
        for slot, x in zip(self.inputs, inputs):
            if (slot is None) != (not isinstance(x, torch.Tensor)):
                return False
            if slot is not None and (tuple(x.shape) != slot.shape or x.dtype != slot.dtype):
                return False
        return True

    def call_spec(self, inputs: list[Any], token: int) -> dict[str, Any]:
        """One call of a request, on ``inputs`` (already loaded with `load`)."""
        args: list[dict[str, Any]] = []
        for slot, x in zip(self.inputs, inputs):
            args.append({"t": slot.spec()} if slot is not None else {"v": encode(x)})
        return {"token": token, "args": args, "outs": [s.spec() for s in self.outputs]}

    def load(self, inputs: list[Any]) -> None:
        """Copy fresh input values in and poison the outputs (unwritten elements stay NaN / -1)."""
        for slot, x in zip(self.inputs, inputs):
            if slot is not None:
                slot.view.copy_(x)
        for slot in self.outputs:
            slot.region.flat[CANARY:CANARY + slot.nbytes].fill_(_POISON_BYTE)

    def broken_canaries(self) -> list[str]:
        return [s.name for s in [*self.inputs, *self.outputs] if s is not None and not s.canary_intact()]

    def mutated_inputs(self, originals: list[Any]) -> list[str]:
        return [slot.name for slot, x in zip(self.inputs, originals)
                if slot is not None and not torch.equal(slot.view, x)]

    def close(self) -> None:
        for slot in [*self.inputs, *self.outputs]:
            if slot is not None:
                slot.view = None  # type: ignore[assignment]
                slot.region.close()


def region_ids() -> Iterator[int]:
    return itertools.count(1)
