"""Crawl seed operators out of torch (and optionally transformers) and verify each by building and calling it.

Introspection finds the candidates and their parameters: the classes of ``torch.nn`` and the tensor functions that
``torch.overrides`` lists for ``torch``, ``torch.nn.functional`` and ``torch.special`` (whose testing signatures name
every parameter, even for builtins). Required parameters are bound by name (`curated.ARG_RULES`), a few operators
are corrected by hand (`curated.CURATED`). Then probing decides the rest: which ranks work, which input value domain
keeps the result finite, whether the result is stochastic, independent of the input, or the input itself, what
domain the output lies in, and whether the meta device can infer its shape.
"""
from __future__ import annotations

import dataclasses
import inspect
import logging
import re
import warnings
from typing import Any, Callable, Collection, Iterable

from cuda_agent.synth import curated
from cuda_agent.synth.ops import apply, prepare, resolve
from cuda_agent.synth.spec import ArgSpec, Catalog, OperatorSpec

log = logging.getLogger(__name__)

PROBE_SHAPES: dict[int, tuple[int, ...]] = {2: (4, 12), 3: (2, 8, 12), 4: (2, 8, 10, 12), 5: (2, 8, 6, 8, 10)}
"""Small shapes every operator is called on: channels 8 (divisible by group counts), even spatial sizes."""

DOMAIN_ORDER = ("real", "positive", "unit", "prob")

_MODULE_CATEGORY = {
    "conv": "conv", "linear": "linear", "normalization": "norm", "batchnorm": "norm", "instancenorm": "norm",
    "pooling": "pool", "activation": "activation", "padding": "shape", "pixelshuffle": "shape", "flatten": "shape",
    "upsampling": "shape", "channelshuffle": "shape", "distance": "other", "transformer": "attention",
    "dropout": "activation", "container": "other",
}
_TENSOR_NAMES = ("input", "self", "x", "a", "A", "tensor")


def sample_input(shape: tuple[int, ...], domain: str, generator: Any = None) -> Any:
    """A CPU tensor of ``shape`` whose values lie in ``domain``."""
    import torch

    if domain == "real":
        return torch.randn(shape, generator=generator) * 3.0
    u = torch.rand(shape, generator=generator)
    if domain == "positive":
        return u + 0.1
    if domain == "unit":
        return u * 1.8 - 0.9
    return u * 0.8 + 0.1


def output_domain(outputs: Iterable[Any]) -> str:
    """The narrowest domain holding every value of ``outputs``."""
    outputs = list(outputs)
    lo = min(float(o.detach().min()) for o in outputs)
    hi = max(float(o.detach().max()) for o in outputs)
    if lo > 0 and hi < 1:
        return "prob"
    if lo > -1 and hi < 1:
        return "unit"
    if lo > 0:
        return "positive"
    if lo >= 0:
        return "nonneg"
    return "real"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """An operator before probing: its spec with introspected arguments and input hints."""

    spec: OperatorSpec
    ranks: tuple[int, ...] = (2, 3, 4, 5)


class ProbeFailure(Exception):
    """The operator could not be verified; the message is the reason the crawl records."""


def _result(spec: OperatorSpec, out: Any) -> tuple[Any, int | None]:
    import torch

    index = spec.output_index
    if isinstance(out, (tuple, list)):
        if not out or not isinstance(out[0], torch.Tensor):
            raise ProbeFailure("returns a tuple without a tensor first")
        out, index = out[0], 0
    if not isinstance(out, torch.Tensor):
        raise ProbeFailure(f"returns {type(out).__name__}, not a tensor")
    if not out.is_floating_point():
        raise ProbeFailure(f"returns {out.dtype}, not floating point")
    if out.dim() == 0 or out.numel() == 0:
        raise ProbeFailure("returns a scalar or empty tensor")
    if not bool(torch.isfinite(out).all()):
        raise ProbeFailure("non-finite output")
    return out, index


_WIDEN = {"prob": "positive", "unit": "real"}


def _claimed_domain(outputs: list[Any], input_domain: str, wide_seen: bool = True) -> str:
    """The output domain to promise: on a real input the samples include a wide (x10) one, so bounded results are
    really bounded; on a restricted input the bound may be an artefact of the input range, so it is widened."""
    found = output_domain(outputs)
    return found if input_domain == "real" else _WIDEN.get(found, found)


def _wide(spec: OperatorSpec, fn: Callable[[Any], Any], x: Any) -> list[Any]:
    """The output on a ten-times wider input, if finite: it shows whether a bounded-looking result is bounded."""
    try:
        return [_result(spec, fn(x * 10.0))[0]]
    except Exception:  # overflow to inf is expected for exp-like operators
        return []


def probe(candidate: Candidate) -> OperatorSpec:
    """Verify one operator on small CPU shapes; return the completed spec or raise `ProbeFailure` with the reason."""
    import torch

    spec = candidate.spec
    hint = spec.inputs[0]
    last_error = "no rank worked"
    for domain in DOMAIN_ORDER:
        ok_ranks: list[int] = []
        outputs: list[Any] = []
        example = None
        index = spec.output_index
        stochastic, independent, identity = False, True, True
        for rank in candidate.ranks:
            shape = PROBE_SHAPES[rank]
            gen = torch.Generator().manual_seed(rank)
            x = sample_input(shape, domain, gen)
            try:
                with warnings.catch_warnings(), torch.no_grad():
                    warnings.simplefilter("ignore")
                    torch.manual_seed(0)
                    fn = prepare(spec, shape)
                    check = dataclasses.replace(spec, output_index=index)
                    out, index = _result(check, fn(x))
                    check = dataclasses.replace(spec, output_index=index)
                    again, _ = _result(check, fn(x))
                    other, _ = _result(check, fn(sample_input(shape, domain, gen)))
                    if domain == "real":
                        outputs.extend(_wide(check, fn, x))
            except ProbeFailure as exc:
                last_error = f"rank {rank}, {domain} input: {exc}"
                continue
            except Exception as exc:  # probing calls arbitrary operators with guessed arguments
                last_error = f"rank {rank}, {domain} input: {type(exc).__name__}: {str(exc)[:160]}"
                continue
            ok_ranks.append(rank)
            outputs.append(out)
            example = example or ((shape,), tuple(out.shape))
            stochastic |= not (again.shape == out.shape and torch.allclose(again, out))
            independent &= other.shape == out.shape and torch.allclose(other, out)
            identity &= out.shape == x.shape and torch.equal(out, x)
        if not ok_ranks:
            continue
        if identity:
            raise ProbeFailure("returns its input unchanged")
        done = dataclasses.replace(
            spec,
            inputs=(dataclasses.replace(hint, ranks=tuple(ok_ranks), domain=domain),) + spec.inputs[1:],
            output_index=index,
            output_domain=_claimed_domain(outputs, domain),
            stochastic=stochastic,
            input_independent=independent,
            example=example,
        )
        done = dataclasses.replace(done, meta_ok=_meta_ok(done), category=_category(done))
        return _batched(done)
    raise ProbeFailure(last_error)


_SPATIAL = re.compile(r"([123])d$", re.IGNORECASE)


def _batched(spec: OperatorSpec) -> OperatorSpec:
    """A ``...2d`` operator also accepts an unbatched input, which in a chain would treat the batch as channels:
    keep only its batched rank (n + 2; BatchNorm1d and InstanceNorm1d also take (N, C))."""
    match = _SPATIAL.search(spec.name)
    if not match:
        return spec
    wanted = {int(match.group(1)) + 2}
    if spec.category == "norm" and match.group(1) == "1":
        wanted.add(2)
    hint = spec.inputs[0]
    ranks = tuple(r for r in hint.ranks if r in wanted) or hint.ranks
    return dataclasses.replace(spec, inputs=(dataclasses.replace(hint, ranks=ranks),) + spec.inputs[1:])


def _meta_ok(spec: OperatorSpec) -> bool:
    import torch

    (shapes, out_shape) = spec.example  # type: ignore[misc]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = apply(spec, torch.empty(shapes[0], device="meta"))
        if spec.output_index is None and isinstance(out, (tuple, list)):
            out = out[0]
        return tuple(out.shape) == tuple(out_shape)
    except Exception:  # an operator without meta kernels raises anything
        return False


def _category(spec: OperatorSpec) -> str:
    if spec.category != "auto":
        return spec.category
    (shapes, out_shape) = spec.example  # type: ignore[misc]
    if any(a.bind == "param" for a in spec.call_args):
        return "binary"
    if tuple(shapes[0]) == tuple(out_shape):
        return "elementwise"
    if len(out_shape) < len(shapes[0]) or any(o < i for o, i in zip(out_shape, shapes[0])):
        return "reduction"
    return "shape"


def _apply_curated(spec: OperatorSpec) -> OperatorSpec | str:
    fix = curated.CURATED.get(spec.name)
    if not fix:
        return spec
    if "skip" in fix:
        return str(fix["skip"])
    changes: dict[str, Any] = {}
    for key in ("init_args", "call_args", "note"):
        if key in fix:
            changes[key] = fix[key]
    hint = spec.inputs[0]
    hint = dataclasses.replace(
        hint,
        channel_multiple=int(fix.get("channel_multiple", hint.channel_multiple)),  # type: ignore[arg-type]
        min_size=int(fix.get("min_size", hint.min_size)),  # type: ignore[arg-type]
    )
    return dataclasses.replace(spec, inputs=(hint,) + spec.inputs[1:], **changes)


def _rule_for(name: str, required: bool) -> ArgSpec | None | str:
    rule = curated.ARG_RULES.get(name)
    if rule is not None:
        return rule
    return f"cannot infer required argument {name!r}" if required else None


def torch_module_candidates() -> Iterable[OperatorSpec | tuple[str, str]]:
    """One spec per public ``torch.nn`` module class (or ``(name, reason)`` for classes that cannot be used)."""
    import torch.nn as nn

    for attr in sorted(dir(nn)):
        cls = getattr(nn, attr)
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or attr.startswith(("_", "Lazy")):
            continue
        name = f"nn.{attr}"
        if attr in curated.SKIP_MODULES or "Loss" in attr:
            yield (name, "not a single-tensor operator (container, loss, index or multi-input module)")
            continue
        try:
            params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        except (TypeError, ValueError):
            yield (name, "constructor signature not introspectable")
            continue
        args, problem = _args_for(params, skip=("device", "dtype"))
        if problem:
            yield (name, problem)
            continue
        category = _MODULE_CATEGORY.get(cls.__module__.rsplit(".", 1)[-1], "other")
        yield OperatorSpec(name=name, kind="module", source="torch.nn", category=category, init_args=tuple(args))


def _args_for(params: Iterable[inspect.Parameter], skip: tuple[str, ...] = ()) -> tuple[list, str | None]:
    """Argument specs for the required parameters (and ``dim``), or the reason one cannot be given a value."""
    args = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in skip:
            continue
        required = p.default is inspect.Parameter.empty
        if not required and p.name != "dim":
            continue
        rule = _rule_for(p.name, required)
        if isinstance(rule, str):
            return args, rule
        if rule is not None:
            args.append(rule)
    return args, None


def torch_function_candidates(namespaces: Iterable[str] = ("torch", "F", "torch.special")) -> Iterable[OperatorSpec | tuple[str, str]]:
    """Specs for the tensor functions ``torch.overrides`` lists, with parameters from its testing signatures."""
    import torch
    import torch.nn.functional as F

    modules = {"torch": torch, "F": F, "torch.special": torch.special}
    overridable = torch.overrides.get_overridable_functions()
    signatures = torch.overrides.get_testing_overrides()
    seen: set[str] = set()
    for prefix in namespaces:
        module = modules[prefix]
        for fn in sorted(overridable.get(module, ()), key=lambda f: getattr(f, "__name__", "")):
            fname = getattr(fn, "__name__", "")
            name = f"{prefix}.{fname}"
            if not fname or name in seen or getattr(module, fname, None) is not fn:
                continue
            seen.add(name)
            if fname.startswith(curated.SKIP_FUNCTION_PREFIXES) or fname.endswith("_"):
                continue
            stub = signatures.get(fn)
            try:
                params = list(inspect.signature(stub or fn).parameters.values())
            except (TypeError, ValueError):
                yield (name, "signature not introspectable")
                continue
            if not params or params[0].name not in _TENSOR_NAMES:
                yield (name, "first parameter is not a tensor")
                continue
            args, problem = _args_for(params[1:])
            if problem:
                yield (name, problem)
                continue
            source = {"torch": "torch", "F": "torch.nn.functional", "torch.special": "torch.special"}[prefix]
            yield OperatorSpec(name=name, kind="function", source=source, category="auto", call_args=tuple(args))


def crawl_operators(
    *,
    include_torch: bool = True,
    include_transformers: bool = True,
    progress: Callable[[str], None] | None = None,
    only: Collection[str] | None = None,
) -> Catalog:
    """Crawl and verify; operators that fail verification are kept in ``Catalog.dropped`` with the reason.

    transformers is optional: when it is not installed its operators are skipped with a logged notice. ``only``
    restricts the crawl to these names (``nn.Conv2d``, ``torch.tanh``, a transformers class's dotted path).
    """
    import torch

    specs: list[OperatorSpec] = []
    dropped: list[tuple[str, str]] = []
    sources: list[Iterable[OperatorSpec | tuple[str, str]]] = []
    if include_torch:
        sources += [torch_module_candidates(), torch_function_candidates()]
    if include_transformers:
        from cuda_agent.synth.hf import transformers_candidates

        sources.append(transformers_candidates())
    for source in sources:
        for item in source:
            if only is not None and (item[0] if isinstance(item, tuple) else item.name) not in only:
                continue
            if isinstance(item, tuple):
                dropped.append(item)
                continue
            fixed = _apply_curated(item)
            if isinstance(fixed, str):
                dropped.append((item.name, fixed))
                continue
            if progress is not None:
                progress(fixed.name)
            ranks = tuple(r for r in (2, 3, 4, 5) if r in fixed.inputs[0].ranks) if fixed.standalone else (2, 3, 4, 5)
            try:
                specs.append(probe(Candidate(fixed, ranks or (2, 3, 4, 5))))
            except ProbeFailure as exc:
                dropped.append((fixed.name, str(exc)))
    log.info("crawl: %d operators verified, %d dropped", len(specs), len(dropped))
    return Catalog(tuple(specs), tuple(dropped), torch_version=str(torch.__version__))


__all__ = ["crawl", "probe", "Candidate", "ProbeFailure", "sample_input", "resolve"]
