"""Check that task source is a usable KernelBench-format module, with errors that name the file and the cause.

Validation executes the module and calls ``get_init_inputs()``, ``Model(...)`` and ``get_inputs()`` under PyTorch's
``meta`` device, so that tasks whose real inputs take gigabytes are checked in milliseconds, on any machine.
"""
from __future__ import annotations

import ast
import logging
import re
import types
import warnings
from dataclasses import dataclass
from typing import Any

from cuda_agent.errors import TaskError

log = logging.getLogger(__name__)

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")

_OP_CALL = re.compile(r"\b(?:torch|F|nn|torch\.nn\.functional)\.([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def check_syntax(code: str, origin: str) -> ast.Module:
    """Parse ``code`` and check the three required top-level names; raise `TaskError` naming ``origin``."""
    try:
        tree = ast.parse(code, filename=origin)
    except SyntaxError as exc:
        raise TaskError(f"{origin}: syntax error at line {exc.lineno}: {exc.msg}") from exc
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    missing = [name for name in REQUIRED_NAMES if name not in defined]
    if missing:
        raise TaskError(
            f"{origin}: missing {', '.join(missing)}; a KernelBench task defines class Model(nn.Module), "
            "get_inputs() and get_init_inputs() at module level"
        )
    return tree


def exec_module(code: str, origin: str, module_name: str = "cuda_agent_task") -> types.ModuleType:
    """Execute task source as a fresh module; raise `TaskError` naming ``origin`` if it fails."""
    module = types.ModuleType(module_name)
    module.__file__ = origin
    try:
        exec(compile(code, origin, "exec"), module.__dict__)
    except Exception as exc:  # a task may raise anything at import
        raise TaskError(f"{origin}: import failed: {type(exc).__name__}: {exc}") from exc
    return module


@dataclass(frozen=True)
class TaskSignature:
    """What a dry run on the meta device learned about a task."""

    init_inputs: tuple[Any, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    input_dtypes: tuple[str | None, ...]
    n_parameters: int


def dry_run(code: str, origin: str) -> TaskSignature:
    """Execute the task on the meta device: build ``Model`` and call ``get_inputs``; raise `TaskError` on failure.

    Warnings the task raises while it runs (PyTorch's deprecation notes, ...) are logged at debug level, not shown:
    they say nothing about whether the task is usable."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return _dry_run(code, origin)
        finally:
            for warning in caught:
                log.debug("%s: %s: %s", origin, warning.category.__name__, warning.message)


def _dry_run(code: str, origin: str) -> TaskSignature:
    import torch

    check_syntax(code, origin)
    module = exec_module(code, origin)
    for name in REQUIRED_NAMES:
        if not callable(getattr(module, name, None)):
            raise TaskError(f"{origin}: {name} is not callable")
    with torch.device("meta"):
        try:
            init_inputs = list(module.get_init_inputs())
        except Exception as exc:
            raise TaskError(f"{origin}: get_init_inputs() raised {type(exc).__name__}: {exc}") from exc
        try:
            model = module.Model(*init_inputs)
        except Exception as meta_exc:
            model = _build_model_on_cpu(module, origin, meta_exc)
        try:
            inputs = module.get_inputs()
        except Exception as exc:
            raise TaskError(f"{origin}: get_inputs() raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(inputs, (list, tuple)):
        raise TaskError(f"{origin}: get_inputs() must return a list or tuple, got {type(inputs).__name__}")
    shapes = tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs)
    dtypes = tuple(str(x.dtype).removeprefix("torch.") if isinstance(x, torch.Tensor) else None for x in inputs)
    n_params = sum(p.numel() for p in model.parameters()) if isinstance(model, torch.nn.Module) else 0
    return TaskSignature(tuple(init_inputs), shapes, dtypes, n_params)


def _build_model_on_cpu(module: types.ModuleType, origin: str, meta_exc: Exception) -> Any:
    """Some models read values while being built (``.item()``), which the meta device cannot do: retry on the CPU."""
    import torch

    with torch.device("cpu"):
        try:
            init_inputs = list(module.get_init_inputs())
            return module.Model(*init_inputs)
        except Exception as exc:
            raise TaskError(f"{origin}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}") from meta_exc


_NOT_OPS = frozenset({
    "rand", "randn", "randint", "rand_like", "randn_like", "zeros", "ones", "empty", "full", "tensor",
    "Parameter", "manual_seed", "no_grad", "device", "Module", "ModuleList", "Sequential", "dtype",
})


def guess_ops(code: str) -> tuple[str, ...]:
    """Operator names called in the task source (``torch.relu``, ``nn.Conv2d``, ``F.softmax`` -> names), in order."""
    seen: dict[str, None] = {}
    for match in _OP_CALL.finditer(code):
        if match.group(1) not in _NOT_OPS:
            seen.setdefault(match.group(1), None)
    return tuple(seen)
