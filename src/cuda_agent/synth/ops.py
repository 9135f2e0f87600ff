"""Turn an `OperatorSpec` into something callable: resolve its name, bind its arguments to a shape, build, call.

The crawler, the rule-based composer and the code generator all bind arguments here, so a spec verified by the
crawl is built the same way in a generated task.
"""
from __future__ import annotations

import importlib
import random
from typing import Any, Callable, Sequence

from cuda_agent.errors import ConfigError
from cuda_agent.synth.spec import ArgSpec, OperatorSpec

DOMAIN_OK: dict[str, frozenset[str]] = {
    "real": frozenset({"real", "nonneg", "positive", "unit", "prob"}),
    "nonneg": frozenset({"nonneg", "positive", "prob"}),
    "positive": frozenset({"positive", "prob"}),
    "unit": frozenset({"unit", "prob"}),
    "prob": frozenset({"prob"}),
}
"""For each domain an input needs, the output domains that satisfy it."""

_ALIASES = {"nn": "torch.nn", "F": "torch.nn.functional"}


def resolve(name: str) -> Any:
    """The class or function a spec name refers to (``nn.Conv2d``, ``F.gelu``, ``torch.special.erf``, ...).

    Raises `ConfigError` if it does not exist in the installed torch / transformers.
    """
    head, _, rest = name.partition(".")
    path = f"{_ALIASES[head]}.{rest}" if head in _ALIASES else name
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"operator {name!r}: cannot import {path} ({exc}); rebuild the catalog for this install") from exc


def param_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """A learnable operand that broadcasts against ``shape``: per channel for rank >= 3, per feature for rank 2."""
    if len(shape) >= 3:
        return (int(shape[1]),) + (1,) * (len(shape) - 2)
    return (int(shape[-1]),)


def bind_arg(arg: ArgSpec, shape: Sequence[int], rng: random.Random | None = None) -> Any:
    """The value of one argument for an input of ``shape``; ``rng`` picks free sizes (None: the verified value)."""
    rank = len(shape)
    if arg.bind == "const":
        return arg.value
    if arg.bind == "dim":
        return int(shape[int(arg.value)])
    if arg.bind == "shape_tail":
        return [int(s) for s in shape[rank - int(arg.value):]]
    if arg.bind == "free":
        return rng.choice(arg.choices) if (rng is not None and arg.choices) else arg.value
    if arg.bind == "dim_index":
        if rng is None:
            return int(arg.value) if 0 < int(arg.value) % rank else -1
        return rng.choice([d for d in range(1, rank)] + [-1])
    if arg.bind == "param":
        return param_shape(shape)
    if arg.bind == "config":
        kwargs = {k: (int(shape[int(v[4:])]) if isinstance(v, str) and v.startswith("dim:") else v)
                  for k, v in dict(arg.value["kwargs"]).items()}
        return {"class": arg.value["class"], "kwargs": kwargs}
    if arg.bind == "positions":
        return [int(shape[0]), int(shape[1])]
    raise ConfigError(f"argument {arg.name!r}: unknown bind {arg.bind!r}")


def bind_all(args: Sequence[ArgSpec], shape: Sequence[int], rng: random.Random | None = None) -> dict[str, Any]:
    return {a.name: bind_arg(a, shape, rng) for a in args}


def make_param(shape: Sequence[int]) -> Any:
    """The tensor a ``param`` argument holds: positive, away from zero, so dividing by it or taking powers is safe."""
    import torch

    return torch.rand(tuple(shape)) + 0.5


def prepare(spec: OperatorSpec, shape: Sequence[int], rng: random.Random | None = None) -> Callable[[Any], Any]:
    """Bind to ``shape``, build the module or the ``param`` operands once (on the default device), return ``x -> out``.

    Building once matters: calling the result twice must not re-draw weights, so that a second call that disagrees
    with the first proves the operator itself is stochastic.
    """
    return prepare_bound(spec, bind_all(spec.init_args, shape, rng), bind_all(spec.call_args, shape, rng))


def prepare_bound(spec: OperatorSpec, init_values: dict[str, Any], values: dict[str, Any]) -> Callable[[Any], Any]:
    """`prepare` with argument values already bound (the composer keeps them to write the task's code)."""
    fn = build(spec, init_values) if spec.kind == "module" else resolve(spec.name)
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for arg in spec.call_args:
        value = materialise(arg, values[arg.name])
        if arg.keyword:
            keywords[arg.name] = value
        else:
            positional.append(value)
    return lambda x: _pick(spec, fn(x, *positional, **keywords))


def materialise(arg: ArgSpec, value: Any) -> Any:
    """The Python object a bound value stands for: a parameter tensor, a positions tensor, a config object."""
    import torch

    if arg.bind == "param":
        return make_param(value)
    if arg.bind == "positions":
        return torch.arange(value[1]).unsqueeze(0).expand(value[0], -1)
    if arg.bind == "config":
        return resolve(value["class"])(**value["kwargs"])
    return value


def build(spec: OperatorSpec, init_values: dict[str, Any]) -> Any:
    """Instantiate a module spec (under whatever default device is active)."""
    cls = resolve(spec.name)
    positional = [materialise(a, init_values[a.name]) for a in spec.init_args if not a.keyword]
    keywords = {a.name: materialise(a, init_values[a.name]) for a in spec.init_args if a.keyword}
    return cls(*positional, **keywords)


def _pick(spec: OperatorSpec, out: Any) -> Any:
    if spec.output_index is not None and isinstance(out, (tuple, list)):
        return out[spec.output_index]
    return out


def apply(spec: OperatorSpec, x: Any, rng: random.Random | None = None) -> Any:
    """Bind to ``x.shape``, build and call in one go (on ``x``'s device)."""
    import torch

    with torch.device(x.device):
        return prepare(spec, tuple(x.shape), rng)(x)
