"""Execution filters: a candidate task is kept only if it runs (eagerly and under torch.compile), is deterministic,
is not degenerate, and its eager runtime lies in a band, after growing its size constants to get there.

Every rejection carries a reason from `REASONS`, so a run's summary counts why candidates were dropped.
"""
from __future__ import annotations

import ast
import contextlib
import logging
import math
import re
import statistics
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, ContextManager

from cuda_agent.errors import TaskError
from cuda_agent.tasks.validate import check_syntax, exec_module

log = logging.getLogger(__name__)

REASONS = (
    "compose_failed", "invalid_code", "stochastic_op", "contaminated", "near_duplicate", "eager_failed",
    "non_finite", "nondeterministic", "degenerate_zero", "degenerate_constant", "degenerate_input_independent",
    "too_fast", "too_slow", "too_large", "compile_failed", "compile_mismatch", "timeout", "worker_crashed",
)
"""Every reason a candidate can be rejected for (a timeout's detail names the phase it hit)."""

_STOCHASTIC = re.compile(
    r"\b(Dropout\w*|dropout\w*|RReLU|rrelu|bernoulli\w*|multinomial|gumbel_softmax|rand\w*|normal_|uniform_|"
    r"exponential_|poisson|FractionalMaxPool\w*|fractional_max_pool\w*)\b"
)


@dataclass(frozen=True)
class FilterConfig:
    """Settings of the execution filters."""

    device: str = "cpu"
    """Where tasks run and are timed: ``cpu`` (tests, small shapes) or ``cuda``."""
    min_ms: float = 1.0
    """Lower end of the eager runtime band (1 ms on the GPU; tests on the CPU set their own)."""
    max_ms: float = 100.0
    """Upper end of the eager runtime band."""
    scale: bool = True
    """Grow the size constant (``batch_size``) of a too-fast task until its runtime enters the band."""
    max_scale_steps: int = 8
    """Most resize-and-time rounds."""
    max_input_bytes: int = 2 << 30
    """Largest total input size scaling may reach (a too-fast task that would need more is ``too_fast``)."""
    warmup: int = 2
    """Untimed calls before timing."""
    repeats: int = 5
    """Timed calls; the median counts."""
    check_compile: bool = True
    """Run the task under torch.compile and compare with eager."""
    compile_backend: str = "inductor"
    """torch.compile backend (``inductor`` is what candidates are compared against)."""
    compile_rtol: float = 1e-2
    """Relative tolerance of the compiled-versus-eager comparison."""
    compile_atol: float = 1e-2
    """Absolute tolerance of the compiled-versus-eager comparison."""
    zero_tol: float = 1e-6
    """Outputs whose largest magnitude is below this are ``degenerate_zero``."""
    seed: int = 0
    """Seed for weights and inputs."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FilterResult:
    """The verdict on one candidate: ``ok`` or a ``reason`` (with ``detail``), and the measured facts."""

    ok: bool
    reason: str = ""
    detail: str = ""
    code: str = ""
    runtime_ms: float | None = None
    scale: int = 1
    compile_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def reject(cls, reason: str, detail: str, code: str = "", **kw: Any) -> "FilterResult":
        return cls(ok=False, reason=reason, detail=detail[:500], code=code, **kw)


def _model_class(tree: ast.Module) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)


def static_check(code: str) -> FilterResult | None:
    """Checks that need no execution: the code parses and has the KernelBench names; the ``Model`` class uses no
    stochastic operator (dropout, random draws in ``forward``). None when both pass."""
    try:
        tree = check_syntax(code, "candidate")
    except TaskError as exc:
        return FilterResult.reject("invalid_code", str(exc), code)
    cls = _model_class(tree)
    if cls is None:
        return FilterResult.reject("invalid_code", "Model is not a class", code)
    for node in ast.walk(cls):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name and _STOCHASTIC.fullmatch(name) and not _in_init_param(cls, node):
            return FilterResult.reject("stochastic_op", f"Model uses {name}", code)
    return None


_INIT_DRAWS = re.compile(r"rand\w*|normal_|uniform_|exponential_")


def _in_init_param(cls: ast.ClassDef, target: ast.AST) -> bool:
    """A random draw inside ``__init__`` (``nn.Parameter(torch.rand(...))``) is seeded initialisation, not noise."""
    name = getattr(target, "attr", getattr(target, "id", ""))
    if not _INIT_DRAWS.fullmatch(name):
        return False
    return any(
        node is target
        for item in cls.body
        if isinstance(item, ast.FunctionDef) and item.name == "__init__"
        for node in ast.walk(item)
    )


def size_constants(code: str) -> dict[str, int]:
    """Module-level ``NAME = <int>`` assignments, in order."""
    out: dict[str, int] = {}
    for node in ast.parse(code).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            out[node.targets[0].id] = node.value.value
    return out


def scaling_constant(code: str) -> str | None:
    """The constant a resize grows: ``batch_size`` if there is one, else the first integer constant that
    ``get_inputs`` reads."""
    consts = size_constants(code)
    if "batch_size" in consts:
        return "batch_size"
    tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id in consts:
                    return sub.id
    return None


def set_constant(code: str, name: str, value: int) -> str:
    """``code`` with the module-level ``name = <int>`` line set to ``value``."""
    pattern = re.compile(rf"^({re.escape(name)}\s*=\s*)\d+(\s*(#.*)?)$", re.MULTILINE)
    new, count = pattern.subn(lambda m: f"{m.group(1)}{value}{m.group(2)}", code, count=1)
    if count != 1:
        raise ValueError(f"no module-level constant {name!r} to set")
    return new


class _Instance:
    """A task's module executed and instantiated on a device, with a way to draw inputs for a seed."""

    def __init__(self, code: str, device: str, seed: int) -> None:
        import torch

        self.device = device
        self.module = exec_module(code, "candidate")
        torch.manual_seed(seed)
        with torch.device(device):
            self.model = self.module.Model(*self.module.get_init_inputs())
        self.model = self.model.to(device)

    def inputs(self, seed: int) -> list[Any]:
        import torch

        torch.manual_seed(seed)
        with torch.device(self.device):
            values = list(self.module.get_inputs())
        return [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in values]

    def __call__(self, inputs: list[Any], model: Any = None) -> list[Any]:
        import torch

        with torch.no_grad():
            out = (self.model if model is None else model)(*inputs)
        return _tensors(out)


def _tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []


def _same(a: list[Any], b: list[Any], rtol: float = 1e-5, atol: float = 1e-7) -> bool:
    import torch

    return len(a) == len(b) and all(
        x.shape == y.shape and torch.allclose(x.float(), y.float(), rtol=rtol, atol=atol, equal_nan=True)
        for x, y in zip(a, b)
    )


def check_outputs(outs: list[Any], outs_other_input: list[Any] | None, config: FilterConfig) -> FilterResult | None:
    """Non-finite, near-zero, constant, or input-independent outputs are rejected; None when fine."""
    import torch

    floats = [o for o in outs if o.is_floating_point() and o.numel() > 0]
    if not floats:
        return FilterResult.reject("degenerate_constant", "no floating-point output")
    if not all(bool(torch.isfinite(o).all()) for o in floats):
        return FilterResult.reject("non_finite", "output holds NaN or Inf")
    peak = max(float(o.abs().max()) for o in floats)
    if peak < config.zero_tol:
        return FilterResult.reject("degenerate_zero", f"largest output magnitude {peak:.3g}")
    if all(float(o.max() - o.min()) <= 1e-6 * max(1.0, float(o.abs().max())) for o in floats):
        return FilterResult.reject("degenerate_constant", "every output element has the same value")
    if outs_other_input is not None and _same(outs, outs_other_input):
        return FilterResult.reject("degenerate_input_independent", "the output does not change with the inputs")
    return None


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], Any], device: str, warmup: int, repeats: int, ceiling_ms: float) -> float:
    """Median wall time of ``fn`` in ms (CUDA events on a GPU); stops early past ``ceiling_ms`` on warm-up."""
    import torch

    start = time.perf_counter()
    for _ in range(max(1, warmup)):
        fn()
        _sync(device)
        if (time.perf_counter() - start) * 1000 > ceiling_ms * max(1, warmup):
            return (time.perf_counter() - start) * 1000 / max(1, warmup)
    samples = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(begin.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def _input_bytes(inputs: list[Any]) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))


def run_filters(
    code: str,
    config: FilterConfig,
    phase: Callable[[str], None] = lambda _p: None,
    timing_lock: ContextManager[Any] | None = None,
) -> FilterResult:
    """Run every execution filter on ``code`` in this process; the returned result holds the (possibly resized)
    code. ``phase`` is told the step being run (a supervisor uses it to name a timeout); ``timing_lock`` is held
    while timing so that parallel workers do not time each other's kernels."""
    static = static_check(code)
    if static is not None:
        return static
    try:
        return _run(code, config, phase, timing_lock or contextlib.nullcontext())
    finally:
        _release(config.device)


def _release(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def _run(code: str, config: FilterConfig, phase: Callable[[str], None], lock: ContextManager[Any]) -> FilterResult:

    phase("eager")
    try:
        inst = _Instance(code, config.device, config.seed)
        inputs = inst.inputs(config.seed)
        outs = inst(inputs)
        outs_other = inst(inst.inputs(config.seed + 1))
    except Exception as exc:  # the candidate may fail in any way
        return FilterResult.reject("eager_failed", f"{type(exc).__name__}: {exc}", code)
    bad = check_outputs(outs, outs_other, config)
    if bad is not None:
        return replace(bad, code=code)
    phase("determinism")
    try:
        again = inst(inputs)
        fresh = _Instance(code, config.device, config.seed)
        rebuilt = fresh(fresh.inputs(config.seed))
    except Exception as exc:
        return FilterResult.reject("eager_failed", f"second run: {type(exc).__name__}: {exc}", code)
    if not _same(outs, again) or not _same(outs, rebuilt):
        return FilterResult.reject("nondeterministic", "two runs with one seed disagree", code)
    del fresh, rebuilt, again, outs_other
    phase("timing")
    sized = _fit_runtime(code, inst, inputs, config, lock)
    if not sized.ok or not config.check_compile:
        return sized
    phase("compile")
    return _compile_check(sized, config)


def _fit_runtime(code: str, inst: _Instance, inputs: list[Any], config: FilterConfig, lock: ContextManager[Any]) -> FilterResult:
    """Time the task; grow its size constant while too fast; reject outside the band."""
    import torch

    name = scaling_constant(code) if config.scale else None
    base = size_constants(code).get(name, 1) if name else 1
    value, ms = base, 0.0
    target = min(math.sqrt(config.min_ms * config.max_ms), 4 * config.min_ms) if config.min_ms > 0 else config.max_ms / 4
    for step in range(config.max_scale_steps + 1):
        try:
            with lock:
                ms = time_ms(lambda: inst(inputs), config.device, config.warmup, config.repeats, config.max_ms)
        except torch.cuda.OutOfMemoryError as exc:
            return FilterResult.reject("too_large", f"out of memory at {name}={value}: {exc}", code)
        except Exception as exc:
            return FilterResult.reject("eager_failed", f"while timing: {type(exc).__name__}: {exc}", code)
        if ms > config.max_ms:
            smaller = value // max(2, math.ceil(ms / target))
            if name is None or step == config.max_scale_steps or smaller < 1 or smaller == value:
                return FilterResult.reject("too_slow", f"{ms:.3g} ms > {config.max_ms} ms", code, runtime_ms=ms,
                                           scale=max(1, value // max(base, 1)))
            value = smaller
        elif ms >= config.min_ms or name is None or step == config.max_scale_steps:
            break
        else:
            factor = max(2, min(64, math.ceil(target / max(ms, 1e-3))))
            if _input_bytes(inputs) * factor > config.max_input_bytes:
                factor = config.max_input_bytes // max(_input_bytes(inputs), 1)
                if factor < 2:
                    break
            value *= factor
        code = set_constant(code, name, value)
        try:
            del inputs
            _release(config.device)
            inst = _Instance(code, config.device, config.seed)
            inputs = inst.inputs(config.seed)
        except torch.cuda.OutOfMemoryError as exc:
            return FilterResult.reject("too_large", f"out of memory at {name}={value}: {exc}", code)
        except Exception as exc:
            return FilterResult.reject("eager_failed", f"at {name}={value}: {type(exc).__name__}: {exc}", code)
    scale = max(1, value // max(base, 1))
    if ms < config.min_ms:
        return FilterResult.reject("too_fast", f"{ms:.3g} ms < {config.min_ms} ms at {name}={value}", code, runtime_ms=ms, scale=scale)
    return FilterResult(ok=True, code=code, runtime_ms=ms, scale=scale)


def _compile_check(sized: FilterResult, config: FilterConfig) -> FilterResult:
    import torch

    torch._dynamo.reset()
    inst = _Instance(sized.code, config.device, config.seed)
    inputs = inst.inputs(config.seed)
    start = time.perf_counter()
    try:
        compiled = torch.compile(inst.model, backend=config.compile_backend)
        got = inst(inputs, compiled)
        _sync(config.device)
    except Exception as exc:  # inductor and dynamo raise many kinds of errors
        return replace(sized, ok=False, reason="compile_failed", detail=f"{type(exc).__name__}: {str(exc)[:400]}")
    seconds = time.perf_counter() - start
    want = inst(inputs)
    for g, w in zip(got, want):
        err = float((g.float() - w.float()).abs().max()) if g.shape == w.shape else math.inf
        if not err <= config.compile_atol + config.compile_rtol * float(w.float().abs().max()):
            return replace(sized, ok=False, reason="compile_mismatch", detail=f"max difference {err:.3g}", compile_s=seconds)
    if len(got) != len(want):
        return replace(sized, ok=False, reason="compile_mismatch", detail="different number of outputs", compile_s=seconds)
    torch._dynamo.reset()
    return replace(sized, compile_s=seconds)
