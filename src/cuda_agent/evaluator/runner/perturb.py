"""Constructing a module with its constant tensors perturbed, identically on both sides, however it makes them.

Why: some tasks output a constant at their module's initialisation (a GroupNorm's weight of ones and bias of zeros
makes L2/23's mean exactly zero), so outputs carry no signal and a constant would pass. Constructed inside
`perturbed_init`, every floating tensor that a filling function makes constant (``torch.ones/zeros/full`` and their
``_like`` and ``new_`` forms, ``Tensor.fill_/zero_``, ``nn.init.ones_/zeros_/constant_``) is replaced at once by
values around its constant. The values depend only on the judge's seed, the tensor's size and its constant (`values`),
drawn from a private generator (the global random stream, which draws the other weights, is not touched). So the
judge's ``Model`` and the candidate's ``ModelNew`` get the same values whether ``ModelNew`` keeps an ``nn.GroupNorm``,
makes ``nn.Parameter(torch.ones(C))``, registers a buffer, loads a state dict built from ``torch.ones``, keeps the
weight as ``[C, 1, 1, 1]``, or folds the weight into another tensor in ``__init__`` (it reads the perturbed values),
in any order. Constants made by arithmetic (``2 * torch.ones(C)``) or from a literal (``torch.tensor([1.0] * C)``)
are not recognised.

The judge constructs its model first and records which (size, constant) pairs it perturbed; the candidate's process
perturbs only those (``keys``). So a scratch buffer or a mask that ``ModelNew`` makes with a size or a constant the
reference never made keeps its exact value; one that shares a pair with the reference's parameters gets the same
values as they do (a zero scratch buffer that must be zero is expected to be cleared where it is used).

Standalone (torch only): the sandboxed candidate process uses it too.
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import torch
import torch.nn.init as nn_init
from torch.overrides import TorchFunctionMode

_SPREAD = 0.5
_MAKERS = frozenset({torch.ones, torch.zeros, torch.full, torch.ones_like, torch.zeros_like, torch.full_like,
                     torch.Tensor.fill_, torch.Tensor.zero_, torch.Tensor.new_ones, torch.Tensor.new_zeros,
                     torch.Tensor.new_full, nn_init.ones_, nn_init.zeros_, nn_init.constant_})

Key = tuple[int, float]


def values(seed: int, numel: int, value: float) -> torch.Tensor:
    """The perturbed values (float64, flat) of a constant ``value`` of ``numel`` elements: uniform within ±0.5 (or
    ±half the constant) around it, from a generator seeded by (``seed``, ``numel``, ``value``) alone."""
    digest = hashlib.sha256(f"{int(seed)}|{int(numel)}|{float(value) + 0.0!r}".encode()).digest()
    generator = torch.Generator(device="cpu")
    generator.manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
    spread = _SPREAD * max(abs(float(value)), 1.0)
    noise = torch.rand(int(numel), generator=generator, dtype=torch.float64)
    return float(value) - spread + 2.0 * spread * noise


@dataclass
class Perturbation:
    """What one construction perturbed: the (size, constant) pairs, for the candidate's side to perturb the same."""

    seed: int
    only: frozenset[Key] | None = None
    keys: set[Key] = field(default_factory=set)

    def sorted_keys(self) -> list[list[float]]:
        return [[numel, value] for numel, value in sorted(self.keys)]

    def apply(self, out: Any) -> None:
        """Replace ``out`` by its perturbed values when it is a floating tensor holding one finite constant."""
        if not isinstance(out, torch.Tensor) or not out.dtype.is_floating_point or out.numel() == 0 or out.is_meta:
            return
        with torch.no_grad():
            flat = out.detach().reshape(-1)
            first = flat[0]
            if not bool(torch.isfinite(first)) or not bool((flat == first).all()):
                return
            key = (int(out.numel()), float(first) + 0.0)
            if self.only is not None and key not in self.only:
                return
            self.keys.add(key)
            new = values(self.seed, *key).to(dtype=out.dtype).reshape(out.shape)
            out.detach().copy_(new.to(out.device))


class _ConstantMode(TorchFunctionMode):
    """Sees every torch call made while the module is constructed; perturbs what the filling functions return."""

    def __init__(self, perturbation: Perturbation) -> None:
        super().__init__()
        self.perturbation = perturbation

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in _MAKERS:
            self.perturbation.apply(out)
        return out


@contextlib.contextmanager
def perturbed_init(enabled: bool = True, seed: int = 0,
                   keys: Iterable[Iterable[float]] | None = None) -> Iterator[Perturbation]:
    """Within the block, constant tensors are made perturbed (see the module). ``keys``: perturb only these (size,
    constant) pairs (the candidate's side: the pairs the judge's construction perturbed); None: every constant (the
    judge's side). Yields the `Perturbation`, whose ``keys`` say what was perturbed."""
    only = None if keys is None else frozenset((int(k[0]), float(k[1]) + 0.0) for k in keys)
    perturbation = Perturbation(int(seed), only)
    if not enabled:
        yield perturbation
        return
    with _ConstantMode(perturbation):
        yield perturbation
