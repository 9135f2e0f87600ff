"""Constructing a module with its constant initialisations perturbed, identically on both sides.

Why: some tasks output a constant at their module's initialisation (a GroupNorm's weight of ones and bias of zeros
makes L2/23's mean exactly zero), so outputs carry no signal and a constant would pass. Constructed inside
`perturbed_init`, every ``nn.init.ones_ / zeros_ / constant_`` draws values around its constant instead, from the
seeded generator, so the judge's ``Model`` and the candidate's ``ModelNew`` (built under the same seed, making the
same layers in the same order, as KernelBench's protocol asks) receive the same perturbed parameters without any
state being copied over ``ModelNew`` (which would undo what its ``__init__`` folded or packed).

Standalone (torch only): the sandboxed candidate process uses it too.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.init as nn_init

_SPREAD = 0.5


def _around(tensor: torch.Tensor, value: float) -> torch.Tensor:
    spread = _SPREAD * max(abs(float(value)), 1.0)
    with torch.no_grad():
        return tensor.uniform_(float(value) - spread, float(value) + spread)


@contextlib.contextmanager
def perturbed_init(enabled: bool = True) -> Iterator[None]:
    """Within the block, constant initialisers draw uniformly around their constant (±0.5, or ±half of it)."""
    if not enabled:
        yield
        return
    saved = (nn_init.ones_, nn_init.zeros_, nn_init.constant_)
    nn_init.ones_ = lambda tensor: _around(tensor, 1.0)  # type: ignore[assignment]
    nn_init.zeros_ = lambda tensor: _around(tensor, 0.0)  # type: ignore[assignment]
    nn_init.constant_ = lambda tensor, val: _around(tensor, val)  # type: ignore[assignment]
    try:
        yield
    finally:
        nn_init.ones_, nn_init.zeros_, nn_init.constant_ = saved
