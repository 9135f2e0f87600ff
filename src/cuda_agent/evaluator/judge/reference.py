"""The reference side: the task's module executed from ``task.code`` (never the workspace's model.py), seeded
models, fresh input sets, and the input variants (another scale, other shapes).

Why ``task.code`` and not the workspace's model.py: the workspace is the candidate's territory; a reference read
from it could have been edited to agree with the candidate.
"""
from __future__ import annotations

import ast
import logging
import os
import types
from dataclasses import dataclass
from typing import Any

import torch

from cuda_agent.errors import TaskError
from cuda_agent.evaluator.runner.perturb import perturbed_init
from cuda_agent.tasks.validate import exec_module

log = logging.getLogger(__name__)

CANONICAL_SEED = 42
# Other magnitudes and signs of the same distribution: range assumptions (clamping, a fixed exponent range) fail on
# some of them. A factor whose reference is not finite is skipped.
SCALE_FACTORS = (10.0, -3.0, 0.01)
_BATCH_NAMES = ("batch_size", "batch", "bs", "n_batch", "num_batches", "B", "N", "M")


def fresh_seeds(n: int, fixed: int | None) -> list[int]:
    """``n`` seeds: from the OS (every call different) unless ``fixed`` is given (debugging only)."""
    if fixed is not None:
        return [fixed + 1000 * i + 1 for i in range(n)]
    return [int.from_bytes(os.urandom(6), "little") for _ in range(n)]


def seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def load_task_module(code: str, origin: str, name: str = "cuda_agent_reference") -> types.ModuleType:
    """Execute the task's source as a fresh module; raise `TaskError` if it fails."""
    return exec_module(code, origin, name)


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def make_inputs(module: types.ModuleType, seed: int, device: torch.device) -> list[Any]:
    """``get_inputs()`` under ``seed``, created directly on ``device`` where the task uses factory functions."""
    seed_all(seed)
    with torch.device(device):
        inputs = module.get_inputs()
    if not isinstance(inputs, (list, tuple)):
        raise TaskError(f"get_inputs() returned {type(inputs).__name__}; a list of inputs is required")
    return [to_device(x, device) for x in inputs]


def init_values(module: types.ModuleType) -> list[Any]:
    """``get_init_inputs()`` as a list (what both models are constructed with)."""
    values = module.get_init_inputs()
    if not isinstance(values, (list, tuple)):
        raise TaskError(f"get_init_inputs() returned {type(values).__name__}; a list is required")
    return list(values)


def build_model(module: types.ModuleType, seed: int, device: torch.device, init: list[Any] | None = None, *,
                perturb: bool = False, perturbed_keys: list[list[float]] | None = None) -> torch.nn.Module:
    """``Model(*get_init_inputs())`` constructed under ``seed`` on the CPU and moved to ``device``: KernelBench's
    protocol, which the candidate's ``ModelNew`` is constructed by too (same seed, nothing copied over it).
    ``perturb``: constant tensors replaced by values around their constants (`runner.perturb`); the (size, constant)
    pairs perturbed are appended to ``perturbed_keys`` (what the candidate's side perturbs)."""
    values = init if init is not None else init_values(module)
    seed_all(seed)
    with perturbed_init(perturb, seed) as perturbation:
        model = module.Model(*values)
    if perturbed_keys is not None:
        perturbed_keys.extend(perturbation.sorted_keys())
    return model.to(device).eval()


def init_inputs(module: types.ModuleType) -> list[Any]:
    with torch.device("meta"):
        return list(module.get_init_inputs())


def scaled(inputs: list[Any], factor: float) -> list[Any] | None:
    """Floating inputs multiplied by ``factor`` (another scale of the same distribution); None if nothing floats."""
    out, changed = [], False
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            out.append(x * factor)
            changed = True
        else:
            out.append(x)
    return out if changed else None


@dataclass(frozen=True)
class ShapeVariant:
    """The task re-executed with one module-level size constant changed."""

    name: str
    old: int
    new: int
    module: types.ModuleType

    @property
    def description(self) -> str:
        return f"{self.name} = {self.new} (was {self.old})"


def _int_constants(tree: ast.Module) -> list[tuple[str, int, ast.Assign]]:
    found = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int and node.value.value >= 2):
            found.append((node.targets[0].id, node.value.value, node))
    return found


def _new_size(name: str, value: int) -> int:
    if name in _BATCH_NAMES or "batch" in name.lower():
        return max(1, value // 2 + 1)  # an odd batch: nothing may assume get_inputs' batch
    if value % 8 == 0 and value >= 16:
        return max(8, (value * 3 // 8) // 8 * 8 + 8)  # still a multiple of 8 (vector loads), not a power of two
    return max(2, value // 2 + 1)


def shape_variant(code: str, origin: str, base: types.ModuleType) -> ShapeVariant | None:
    """Re-execute the task with the first size constant that ``get_inputs`` uses but ``get_init_inputs`` does not
    (batch-like names first) changed; None where no such constant exists or the changed task does not run."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    constants = _int_constants(tree)
    constants.sort(key=lambda c: (0 if (c[0] in _BATCH_NAMES or "batch" in c[0].lower()) else 1))
    try:
        base_init = repr(init_inputs(base))
        with torch.device("meta"):
            base_shapes = [tuple(x.shape) for x in base.get_inputs() if isinstance(x, torch.Tensor)]
    except Exception:  # noqa: BLE001 - a task that cannot run on meta simply gets no shape variant
        return None
    for name, value, node in constants:
        new = _new_size(name, value)
        if new == value:
            continue
        node.value = ast.Constant(new)
        try:
            variant = exec_module(ast.unparse(tree), origin, "cuda_agent_reference_variant")
            same_init = repr(init_inputs(variant)) == base_init
            with torch.device("meta"):
                shapes = [tuple(x.shape) for x in variant.get_inputs() if isinstance(x, torch.Tensor)]
        except Exception:  # noqa: BLE001
            same_init, shapes = False, base_shapes
        finally:
            node.value = ast.Constant(value)
        if same_init and shapes != base_shapes:
            return ShapeVariant(name, value, new, variant)
    return None
