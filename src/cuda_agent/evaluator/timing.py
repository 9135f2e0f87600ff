"""Trusted timing of a forward call: device events, L2 flush, warm-up, adaptive repetitions, rotated inputs.

Why this module binds its primitives at import: the candidate's code runs in the same process as the timer. Every
clock, event method and synchronisation call used here is captured when this module is imported, which the
evaluator does before any candidate code loads, so a later ``time.perf_counter = ...`` or
``torch.cuda.Event.elapsed_time = ...`` has no effect on the numbers; `patched_primitives` reports such patches so
the evaluator can reject them by rule. Event methods are taken from PyTorch's C base class, whose attributes
cannot be reassigned from Python at all.

Why events and not CUDA-graph replays: a graph replay hides the host launch cost that eager PyTorch and
``torch.compile`` pay on every call, and capture fails on legitimate code that synchronises; events around each
call time what a user of the module would see.

Why the device is idle when each bracket opens: the L2 flush is waited for before the start event, so the time
includes the host's launch path of the call (as a user calling the module sees it, and as KernelBench measures)
and the host clock and the events bracket exactly the same work.

Why each iteration also has a host-side clock: events on the current stream do not see work that the candidate
puts on another stream without joining it back. The whole device is synchronised after every call, and the host
time of the bracket (less a calibrated empty-bracket overhead) bounds the device-wide time; where it exceeds the
event time by more than noise, the device-wide times are reported instead (``clock == "device_wide"``) and
``hidden_ms`` says how much work the events missed.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Iterable, Sequence

import torch

from cuda_agent.errors import VerificationError

log = logging.getLogger(__name__)

# Trusted primitives, bound before any candidate code can run.
_perf_counter = time.perf_counter
_EventBase = torch._C._CudaEventBase if hasattr(torch._C, "_CudaEventBase") else None
_event_record = _EventBase.record if _EventBase is not None else None
_event_elapsed = _EventBase.elapsed_time if _EventBase is not None else None
_cuda_synchronize = getattr(torch._C, "_cuda_synchronize", None)
_current_stream = torch.cuda.current_stream
_no_grad = torch.no_grad
_SystemRandom = random.SystemRandom

_WATCHED = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.time",
    "time.time_ns",
    "time.process_time",
    "torch.cuda.Event",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "torch.cuda.Event.query",
    "torch.cuda.Event.wait",
    "torch.cuda.Stream",
    "torch.cuda.Stream.synchronize",
    "torch.cuda.Stream.wait_stream",
    "torch.cuda.Stream.wait_event",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "torch.cuda.default_stream",
    "torch.cuda.set_stream",
    "torch.cuda.stream",
    "torch._C._cuda_synchronize",
    "torch.profiler.profile",
    "torch.allclose",
    "torch.isclose",
    "torch.equal",
    "torch.isfinite",
    "torch.isnan",
    "torch.testing.assert_close",
    "torch.Tensor.allclose",
    "torch.Tensor.equal",
)
_MISSING = object()


def _resolve(dotted: str) -> Any:
    """Look ``dotted`` up from ``sys.modules`` each time, so that a replaced module is noticed too."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            obj: Any = module
            for attr in parts[cut:]:
                obj = getattr(obj, attr, _MISSING)
                if obj is _MISSING:
                    return _MISSING
            return obj
    return _MISSING


def _snapshot(names: Iterable[str]) -> dict[str, Any]:
    for module in ("torch.profiler", "torch.testing"):  # so that their functions are captured now
        importlib.import_module(module)
    return {name: _resolve(name) for name in names}


_ORIGINALS: dict[str, Any] = _snapshot(_WATCHED)


def register_primitives(names: Iterable[str]) -> None:
    """Also watch ``names`` (dotted paths) from now on; call at import time, before candidate code loads."""
    for name in names:
        _ORIGINALS.setdefault(name, _resolve(name))


def patched_primitives() -> list[str]:
    """Names of watched timers, events, synchronisation and comparison functions replaced since import.

    An empty list means nothing was replaced. The evaluator calls this after running candidate code; a non-empty
    list means the candidate tried to tamper with the measurement or the checker.
    """
    return sorted(name for name, original in _ORIGINALS.items() if _resolve(name) is not original)


class OutputMismatchDuringTiming(VerificationError):
    """The candidate's output, checked again during timing, differed from the reference.

    Rationale: stops kernels that are correct while verified and then cut corners (cached, stale or partial
    results) once they believe they are being timed.
    """

    def __init__(self, message: str, iteration: int, input_index: int) -> None:
        super().__init__(message)
        self.iteration = iteration
        self.input_index = input_index


@dataclass(frozen=True)
class TimingStats:
    """Summary of the per-call times of one timed function, in milliseconds.

    ``ci_low_ms``/``ci_high_ms``: a distribution-free 95% confidence interval of the median. ``clock``: what the
    times are (``cuda_events``, ``device_wide`` when work the events missed was counted, ``perf_counter`` on a
    CPU). ``host_median_ms``: median host-side time of the bracket less the calibrated overhead; ``hidden_ms``:
    how much longer that was than the event time (work on streams the events did not see).
    """

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    cv: float
    n: int
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    clock: str = "cuda_events"
    host_median_ms: float | None = None
    hidden_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.ci_low_ms is None:
            object.__setattr__(self, "ci_low_ms", self.median_ms)
        if self.ci_high_ms is None:
            object.__setattr__(self, "ci_high_ms", self.median_ms)

    @property
    def rel_ci(self) -> float:
        """Half-width of the median's confidence interval relative to the median."""
        if self.median_ms <= 0:
            return math.inf
        return (float(self.ci_high_ms) - float(self.ci_low_ms)) / (2.0 * self.median_ms)  # type: ignore[arg-type]

    def scaled(self, factor: float) -> "TimingStats":
        """The same statistics with every time multiplied by ``factor`` (cv and n unchanged). Raises ValueError
        unless ``factor`` is positive and finite."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"TimingStats.scaled: factor must be positive and finite, got {factor}")
        times = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "ci_low_ms", "ci_high_ms", "hidden_ms")
        changes = {name: getattr(self, name) * factor for name in times}
        if self.host_median_ms is not None:
            changes["host_median_ms"] = self.host_median_ms * factor
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TimingStats":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_samples(
        cls, samples_ms: Sequence[float], *, clock: str = "cuda_events", host_median_ms: float | None = None,
        hidden_ms: float = 0.0,
    ) -> "TimingStats":
        """Summarise raw samples; raise ValueError on an empty sequence."""
        if not samples_ms:
            raise ValueError("TimingStats.from_samples needs at least one sample")
        xs = sorted(float(x) for x in samples_ms)
        n = len(xs)
        median = _median_sorted(xs)
        mean = sum(xs) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        lo, hi = _median_ci_sorted(xs)
        return cls(
            median_ms=median, mean_ms=mean, std_ms=std, min_ms=xs[0], max_ms=xs[-1],
            cv=std / mean if mean > 0 else 0.0, n=n, ci_low_ms=lo, ci_high_ms=hi, clock=clock,
            host_median_ms=host_median_ms, hidden_ms=hidden_ms,
        )


def _median_sorted(xs: Sequence[float]) -> float:
    n = len(xs)
    mid = n // 2
    return xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def _median_ci_sorted(xs: Sequence[float]) -> tuple[float, float]:
    """95% order-statistic interval of the median (binomial, normal approximation)."""
    n = len(xs)
    if n < 3:
        return xs[0], xs[-1]
    half = 0.98 * math.sqrt(n)
    lo = max(0, int(math.floor(n / 2 - half)) - 1)
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return xs[lo], xs[hi]


@dataclass(frozen=True)
class TimingConfig:
    """How hard `time_forward` tries. ``reps`` is the minimum number of timed calls (unless ``time_cap_s`` is
    reached first); more are run, up to ``max_reps``, until the median's relative 95% CI half-width is at most
    ``target_rel_ci``. ``check_fraction`` of the timed calls (and always the first) have their output checked."""

    warmup: int = 5
    reps: int = 50
    max_reps: int = 1000
    target_rel_ci: float = 0.005
    time_cap_s: float = 2.0
    flush_l2: bool = True
    check_fraction: float = 0.1
    max_checks: int = 16
    hidden_abs_ms: float = 0.015
    hidden_rel: float = 0.1


_FLUSH_BUFFERS: dict[int, torch.Tensor] = {}


def l2_flush_bytes(device: torch.device) -> int:
    """Size of the buffer written between iterations: twice the device's L2 (at least 64 MiB)."""
    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    return max(2 * l2, 64 << 20)


def _flush_buffer(device: torch.device) -> torch.Tensor:
    index = device.index if device.index is not None else torch.cuda.current_device()
    buf = _FLUSH_BUFFERS.get(index)
    if buf is None:
        buf = torch.empty(l2_flush_bytes(device), dtype=torch.int8, device=device)
        _FLUSH_BUFFERS[index] = buf
    return buf


def _infer_device(fn: Any, input_sets: Sequence[Sequence[Any]]) -> torch.device:
    """The CUDA device of the inputs or of ``fn``'s parameters; else the current CUDA device once CUDA is in use
    (a function without tensor inputs may still launch GPU work, which only the events and syncs see); else CPU."""
    for inputs in input_sets:
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.device.type == "cuda":
                return x.device
    if isinstance(fn, torch.nn.Module):
        for t in list(fn.parameters()) + list(fn.buffers()):
            if t.device.type == "cuda":
                return t.device
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class _Clock:
    """One bracket around a call: events on the current stream plus the host clock, device-synchronised."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        if self.cuda:
            if _EventBase is None or _cuda_synchronize is None:
                raise VerificationError("timing: this PyTorch build has no CUDA events; time on a CUDA build")
            self.start = _EventBase(enable_timing=True)
            self.end = _EventBase(enable_timing=True)
            self.stream = _current_stream(device)

    def begin(self) -> float:
        t0 = _perf_counter()
        if self.cuda:
            _event_record(self.start, self.stream)
        return t0

    def finish(self, t0: float) -> tuple[float, float]:
        """Return (event ms, host ms) for the bracket opened at ``t0``."""
        if not self.cuda:
            ms = (_perf_counter() - t0) * 1e3
            return ms, ms
        _event_record(self.end, self.stream)
        _cuda_synchronize()
        host = (_perf_counter() - t0) * 1e3
        return float(_event_elapsed(self.start, self.end)), host

    def overhead_ms(self, n: int = 25) -> float:
        """Median host time of an empty bracket: what `finish` adds on top of the device time."""
        if not self.cuda:
            return 0.0
        samples = []
        for _ in range(n):
            t0 = self.begin()
            samples.append(self.finish(t0)[1])
        return _median_sorted(sorted(samples))


def time_forward(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    *,
    warmup: int | None = None,
    reps: int | None = None,
    flush_l2: bool | None = None,
    check: Callable[[int, Any], bool | None] | None = None,
    before_check: Callable[[int], None] | None = None,
    config: TimingConfig | None = None,
    device: torch.device | str | None = None,
) -> TimingStats:
    """Time ``fn(*input_sets[i])``, rotating ``i`` over the sets, and return the per-call statistics.

    ``warmup``, ``reps`` and ``flush_l2`` override the same fields of ``config`` (defaults 5, 50, True).
    ``device``: where to time (default: inferred, see `_infer_device`); a CUDA device uses events, a CPU the clock.

    ``check(i, output)`` is called, outside the timed region, on a random sample of iterations (always the first);
    ``i`` is the index of the input set used. It returns False or raises to signal a wrong output.
    ``before_check(i)``, if given, runs before each checked iteration, outside the timed region; use it to refill
    set ``i`` in place with fresh values so that results cached on addresses or versions are caught.

    Raises:
        OutputMismatchDuringTiming: ``check`` returned False or raised.
        ValueError: no input sets were given.
        Anything ``fn`` raises propagates unchanged.
    """
    if not input_sets:
        raise ValueError("time_forward: input_sets is empty; pass at least one list of inputs")
    cfg = config or TimingConfig()
    overrides = {"warmup": warmup, "reps": reps, "flush_l2": flush_l2}
    cfg = replace(cfg, **{k: v for k, v in overrides.items() if v is not None})
    device = torch.device(device) if device is not None else _infer_device(fn, input_sets)
    on_device = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        with on_device, _no_grad():
            events, hosts, cuda = _timed_loop(fn, input_sets, cfg, device, check, before_check)
    finally:
        if gc_was_enabled:
            gc.enable()
    return _summarise(events, hosts, cuda, cfg)


def _timed_loop(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    cfg: TimingConfig,
    device: torch.device,
    check: Callable[[int, Any], bool | None] | None,
    before_check: Callable[[int], None] | None,
) -> tuple[list[float], list[float], bool]:
    """Warm up, calibrate, then run timed calls until the median is stable or the cap is hit; return the event
    times, the host times (less the empty-bracket overhead) and whether the device clock was used."""
    clock = _Clock(device)
    flush = _flush_buffer(device) if (clock.cuda and cfg.flush_l2) else None
    rng = _SystemRandom()
    per_call_s = _warm_up(fn, input_sets, cfg, clock)
    overhead = clock.overhead_ms()
    min_reps = max(3, min(cfg.reps, int(cfg.time_cap_s / max(per_call_s, 1e-9))))
    events: list[float] = []
    hosts: list[float] = []
    checks_done = 0
    deadline = _perf_counter() + cfg.time_cap_s
    i = 0
    while True:
        index = i % len(input_sets)
        do_check = check is not None and checks_done < cfg.max_checks and (i == 0 or rng.random() < cfg.check_fraction)
        if do_check and before_check is not None:
            before_check(index)
        if flush is not None:
            flush.zero_()
            _cuda_synchronize()  # the flush must not overlap the bracket (see module docstring)
        t0 = clock.begin()
        out = fn(*input_sets[index])
        ev, host = clock.finish(t0)
        events.append(ev)
        hosts.append(max(0.0, host - overhead))
        if do_check:
            checks_done += 1
            _run_check(check, i, index, out)  # type: ignore[arg-type]
        del out
        i += 1
        if i >= cfg.max_reps or (i >= min_reps and _perf_counter() > deadline):
            break
        if i >= min_reps and i % 10 == 0 and _rel_ci(events) <= cfg.target_rel_ci:
            break
    return events, hosts, clock.cuda


def _warm_up(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]], cfg: TimingConfig, clock: _Clock) -> float:
    """Run the warm-up calls (at least one; fewer if they eat a quarter of the cap); return seconds per call."""
    start = _perf_counter()
    done = 0
    for k in range(max(1, cfg.warmup)):
        t0 = clock.begin()
        fn(*input_sets[k % len(input_sets)])
        clock.finish(t0)
        done += 1
        if _perf_counter() - start > cfg.time_cap_s / 4:
            break
    return (_perf_counter() - start) / done


def _run_check(check: Callable[[int, Any], bool | None], iteration: int, index: int, out: Any) -> None:
    try:
        verdict = check(index, out)
    except OutputMismatchDuringTiming:
        raise
    except Exception as exc:
        raise OutputMismatchDuringTiming(
            f"timing: the output of timed call {iteration} (input set {index}) failed the check: "
            f"{type(exc).__name__}: {exc}; the kernel must return correct results on every call",
            iteration, index,
        ) from exc
    if verdict is False:
        raise OutputMismatchDuringTiming(
            f"timing: the output of timed call {iteration} (input set {index}) differs from the reference; "
            "the kernel must return correct results on every call, not only while verified",
            iteration, index,
        )


def _rel_ci(samples: Sequence[float]) -> float:
    xs = sorted(samples)
    median = _median_sorted(xs)
    if median <= 0:
        return 0.0
    lo, hi = _median_ci_sorted(xs)
    return (hi - lo) / (2.0 * median)


def _summarise(events: list[float], hosts: list[float], cuda: bool, cfg: TimingConfig) -> TimingStats:
    if not cuda:
        return TimingStats.from_samples(events, clock="perf_counter", host_median_ms=_median_sorted(sorted(hosts)))
    ev_median = _median_sorted(sorted(events))
    host_median = _median_sorted(sorted(hosts))
    hidden = max(0.0, host_median - ev_median)
    if hidden > max(cfg.hidden_abs_ms, cfg.hidden_rel * ev_median):
        log.warning(
            "timing: host-side time exceeds the event time by %.4f ms (median); counting device-wide time, "
            "work probably ran on a stream the events did not see", hidden,
        )
        wide = [max(e, h) for e, h in zip(events, hosts)]
        return TimingStats.from_samples(wide, clock="device_wide", host_median_ms=host_median, hidden_ms=hidden)
    return TimingStats.from_samples(events, clock="cuda_events", host_median_ms=host_median, hidden_ms=hidden)
