"""Tasks whose outputs carry no signal at their module's initialisation, and what the judge does about them.

Rationale: L2/23 (Conv3d, GroupNorm, mean) outputs exactly zero at initialisation (the GroupNorm's unit weight and
zero bias make every group's mean vanish), so the reference is rounding noise and a constant passes every check,
while the tiny-output check would refuse a faithful kernel. Where a constant would pass the tolerance, the outputs
are compared with those of the module constructed with perturbed constant initialisations (`runner.perturb`): much
smaller means the initialisation is degenerate, and the whole evaluation then uses the perturbed parameters (the
candidate's ``ModelNew`` is built the same way under the same seed). Outputs bitwise equal for different inputs mean
the task computes a constant whatever its inputs: then any constant that matches is correct, and the tiny-output
check is off.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from cuda_agent.evaluator.judge import compare, reference

SIGNAL_RATIO = 1e-3


@dataclass(frozen=True)
class Degeneracy:
    perturb: bool
    constant: bool
    rms_plain: float = 0.0
    rms_perturbed: float | None = None


def classify(module: Any, init: list[Any], seed: int, device: torch.device,
             tolerances: Callable[[str], tuple[float, float]], fresh_seed: Callable[[], int]) -> Degeneracy:
    """Whether to verify ``module``'s task with perturbed parameters, and whether its output is input-independent."""
    inputs = [reference.make_inputs(module, fresh_seed(), device) for _ in range(2)]

    def outputs(perturb: bool) -> list[Any]:
        model = reference.build_model(module, seed, device, init, perturb=perturb)
        with torch.no_grad():
            return [model(*x) for x in inputs]

    plain = outputs(False)
    rms_plain = rms(plain)
    if not tiny(plain, tolerances):
        return Degeneracy(False, False, rms_plain)
    perturbed = outputs(True)
    rms_perturbed = rms(perturbed)
    perturb = rms_perturbed > 0 and rms_plain < SIGNAL_RATIO * rms_perturbed
    chosen = perturbed if perturb else plain
    return Degeneracy(perturb, bitwise_equal(chosen[0], chosen[1]), rms_plain, rms_perturbed)


def _floats(outputs: list[Any]) -> list[torch.Tensor]:
    return [v for o in outputs for _, v in compare.flatten(o) if isinstance(v, torch.Tensor)
            and v.dtype.is_floating_point and v.numel()]


def tiny(outputs: list[Any], tolerances: Callable[[str], tuple[float, float]]) -> bool:
    """Whether a constant would pass the tolerance on every floating output (the spread of the values within
    atol + rtol * |mean|)."""
    tensors = _floats(outputs)
    if not tensors:
        return False
    for t in tensors:
        flat = t.reshape(-1).double()
        if not bool(torch.isfinite(flat).all()):
            return False
        mean = float(flat.mean())
        spread = float((flat - mean).abs().max())
        atol, rtol = tolerances(str(t.dtype).removeprefix("torch."))
        if spread > atol + rtol * abs(mean):
            return False
    return True


def rms(outputs: list[Any]) -> float:
    tensors = _floats(outputs)
    total = sum(float((t.double() ** 2).sum()) for t in tensors)
    count = sum(t.numel() for t in tensors)
    return (total / count) ** 0.5 if count else 0.0


def bitwise_equal(a: Any, b: Any) -> bool:
    pairs = list(zip(compare.flatten(a), compare.flatten(b)))
    return bool(pairs) and all(isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and
                               compare.tensors_equal(x, y) for (_, x), (_, y) in pairs)
