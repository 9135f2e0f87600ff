"""Timing a forward call in the judge's own process: device events, L2 flush, warm-up, adaptive repetitions,
rotated inputs (`time_forward`), and batched requests (`time_batched`), with which the judge times eager PyTorch and
torch.compile the way it times a candidate (the baselines, and eager again for the drift correction; the candidate's
own times are the judge's clock of its requests, `cuda_agent.evaluator.judge.measure`).

Two clocks for the judge's batched requests. `time_batched`: K calls launched from the host back to back, which
times what a user of the module sees, host launch cost included (where a call's host work exceeds its kernels', the
host's time is what it measures). `time_graphed`: the same K calls and output copies captured once in one CUDA graph
and replayed, which times the device work alone: the quantity Nsight Compute sums (measured on the H200,
2026-12-03: host-launched requests came out 0.35x-28x over ncu on kernels of 13 us-0.25 ms, where the calls' Python
and launch path, not their kernels, set the pace). The judge uses the graph clock for the candidate and both
baselines where all three capture, and the host-launched clock for all three where any does not (capture refuses
code that synchronises or allocates outside the graph's pool), so a speedup always compares like with like.

Why the device is idle when each bracket opens: the L2 flush is waited for before the start event, so the time
includes the host's launch path of the call (as a user calling the module sees it, and as KernelBench measures)
and the host clock and the events bracket exactly the same work.

Why each iteration also has a host-side clock: events on the current stream do not see work put on another stream
without joining it back. The whole device is synchronised after every call, and the host time of the bracket (less a
calibrated empty-bracket overhead) bounds the device-wide time; where it exceeds the event time by more than noise,
the device-wide times are reported instead (``clock == "device_wide"``) and ``hidden_ms`` says how much work the
events missed.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch

from cuda_agent.errors import VerificationError
from cuda_agent.evaluator.stats import TimingStats, _median_sorted, rel_ci

log = logging.getLogger(__name__)

_perf_counter = time.perf_counter
_EventBase = torch._C._CudaEventBase if hasattr(torch._C, "_CudaEventBase") else None
_event_record = _EventBase.record if _EventBase is not None else None
_event_elapsed = _EventBase.elapsed_time if _EventBase is not None else None
_cuda_synchronize = getattr(torch._C, "_cuda_synchronize", None)
_current_stream = torch.cuda.current_stream
_no_grad = torch.no_grad
_SystemRandom = random.SystemRandom


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
    return summarise(events, hosts, cuda, cfg)


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
        if i >= min_reps and i % 10 == 0 and rel_ci(events) <= cfg.target_rel_ci:
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


def summarise(events: list[float], hosts: list[float], cuda: bool, cfg: TimingConfig) -> TimingStats:
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


def _tensor_leaves(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensor_leaves(item)]
    return []


def time_batched(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    *,
    requests: int = 10,
    warmup_requests: int = 1,
    time_cap_s: float = 2.0,
    device: torch.device | str | None = None,
) -> TimingStats:
    """Per-call time of ``fn`` measured the way the judge times a candidate (`judge.session`): a request is
    ``len(input_sets)`` calls back to back, one per input set, each call's tensor outputs copied into buffers of its
    own (as the candidate's runner copies into the judge's), with the L2 flushed and the device idle before the
    request and one synchronisation after it. A call's time is the request's span less the span of the same request
    whose calls only copy ready-made outputs (the null model), divided by the number of calls. Spans are device
    events on a GPU and the host clock on a CPU.

    Why batched and why the null span: a per-call bracket adds the launch and synchronisation latency of every call
    (0.4-1 ms on the H200, most of a 10 us kernel's time); K calls in flight back to back share one such latency,
    which the null span removes, so the judge's times of the candidate and of eager PyTorch or torch.compile are
    the same quantity, measured alike.

    Raises ValueError if no input sets are given; anything ``fn`` raises propagates.
    """
    if not input_sets:
        raise ValueError("time_batched: input_sets is empty; pass at least one list of inputs")
    device = torch.device(device) if device is not None else _infer_device(fn, input_sets)
    cuda = device.type == "cuda"
    on_device = torch.cuda.device(device) if cuda else contextlib.nullcontext()
    with on_device, _no_grad():
        outs = [_tensor_leaves(fn(*inputs)) for inputs in input_sets]
        buffers = [[torch.empty_like(t) for t in leaves] for leaves in outs]
        ready = outs[0]
        flush = _flush_buffer(device) if cuda else None

        def work(k: int) -> None:
            for dst, src in zip(buffers[k], _tensor_leaves(fn(*input_sets[k]))):
                dst.copy_(src)

        def null(k: int) -> None:
            for dst, src in zip(buffers[k], ready):
                dst.copy_(src)

        def span(call: Callable[[int], None]) -> float:
            if flush is not None:
                flush.zero_()
                _cuda_synchronize()
            if cuda:
                start, end = _EventBase(enable_timing=True), _EventBase(enable_timing=True)
                _event_record(start, _current_stream(device))
                for k in range(len(input_sets)):
                    call(k)
                _event_record(end, _current_stream(device))
                _cuda_synchronize()
                return float(_event_elapsed(start, end))
            t0 = _perf_counter()
            for k in range(len(input_sets)):
                call(k)
            return (_perf_counter() - t0) * 1e3

        gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()
        try:
            return _null_subtracted(lambda: span(work), lambda: span(null), len(input_sets),
                                    clock="batched_events" if cuda else "batched_perf_counter", requests=requests,
                                    warmup_requests=warmup_requests, time_cap_s=time_cap_s)
        finally:
            if gc_was_enabled:
                gc.enable()


def _null_subtracted(work_span: Callable[[], float], null_span: Callable[[], float], calls: int, *, clock: str,
                     requests: int, warmup_requests: int, time_cap_s: float) -> TimingStats:
    """Per-call times from requests of ``calls`` calls: the spans of the work and of the null request alternate
    (after ``warmup_requests`` of each), at least 3 and up to ``requests`` pairs within ``time_cap_s``; a call's time
    is a work span less the median null span, over ``calls``. Shared by `time_batched` and `time_graphed`, so that
    the two clocks sample and subtract alike."""
    for _ in range(max(0, warmup_requests)):
        work_span()
        null_span()
    deadline = _perf_counter() + time_cap_s
    spans: list[float] = []
    nulls: list[float] = []
    while len(spans) < max(1, requests) and (len(spans) < 3 or _perf_counter() < deadline):
        nulls.append(null_span())
        spans.append(work_span())
    overhead = _median_sorted(sorted(nulls))
    per_call = [max(s - overhead, 0.0) / calls for s in spans]
    return TimingStats.from_samples(per_call, clock=clock, host_median_ms=_median_sorted(sorted(spans)) / calls)


class GraphCaptureError(RuntimeError):
    """``fn`` could not be captured in a CUDA graph (it synchronises, reads a value back to the host, allocates
    outside the graph's pool, or returns something other than tensors); time it with `time_batched` instead."""


def capture_calls(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]], buffers: list[list[torch.Tensor]],
                  stream: Any, pool: Any = None) -> Any:
    """One CUDA graph holding ``fn`` on every input set in turn, each call's tensor outputs copied into that set's
    ``buffers``. ``fn`` must have run on these inputs before (lazy initialisation and autotuning happen outside the
    capture). Raises `GraphCaptureError` where capture fails or an output is not a plain contiguous tensor of the
    buffer's shape and dtype (its copy would not be a plain memory copy)."""
    from cuda_agent.evaluator.runner.graphs import end_failed_capture

    graph = torch.cuda.CUDAGraph()
    current = torch.cuda.current_stream()
    try:
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            for inputs, dsts in zip(input_sets, buffers):
                leaves = _graph_leaves(fn(*inputs), dsts)
                for dst, src in zip(dsts, leaves):
                    dst.copy_(src)
    except Exception as exc:  # capture refuses many legitimate things; the host-launched clock then times them
        end_failed_capture(graph, current)
        if isinstance(exc, GraphCaptureError):
            raise
        raise GraphCaptureError(f"{type(exc).__name__}: {str(exc)[:500]}") from exc
    return graph


def _all_leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _all_leaves(item)]
    return [value]


def _graph_leaves(out: Any, dsts: list[torch.Tensor]) -> list[torch.Tensor]:
    leaves = _all_leaves(out)
    if len(leaves) != len(dsts) or not all(isinstance(t, torch.Tensor) and t.is_contiguous() and
                                           t.shape == d.shape and t.dtype == d.dtype for t, d in zip(leaves, dsts)):
        raise GraphCaptureError("the outputs are not plain contiguous tensors shaped like the reference's")
    return leaves


def _close(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal up to the run-to-run differences of an honest kernel (atomics, split reductions)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if not got.is_floating_point():
        return bool(torch.equal(got, want))
    return bool(torch.allclose(got, want, rtol=1e-3, atol=1e-5, equal_nan=True))


def time_graphed(
    fn: Callable[..., Any],
    input_sets: Sequence[Sequence[Any]],
    *,
    requests: int = 10,
    warmup_requests: int = 1,
    time_cap_s: float = 2.0,
    device: torch.device | str | None = None,
) -> TimingStats:
    """Per-call device time of ``fn`` on the graph clock: `time_batched`'s request (K calls on K input sets, each
    call's outputs copied into buffers of its own, the L2 flushed and the device idle before it), captured once in
    one CUDA graph and replayed; a call's time is the replay's span less the span of the null graph (the same
    copies of ready-made outputs), over K. CUDA only. Raises `GraphCaptureError` where ``fn`` cannot be captured
    and ValueError without input sets or without a CUDA device."""
    if not input_sets:
        raise ValueError("time_graphed: input_sets is empty; pass at least one list of inputs")
    device = torch.device(device) if device is not None else _infer_device(fn, input_sets)
    if device.type != "cuda":
        raise ValueError(f"time_graphed: CUDA graphs need a CUDA device, the inputs are on {device}")
    with torch.cuda.device(device), _no_grad():
        outs = [_tensor_leaves(fn(*inputs)) for inputs in input_sets]
        buffers = [[torch.empty_like(t) for t in leaves] for leaves in outs]
        ready = [t.clone() for t in outs[0]]
        flush = _flush_buffer(device)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):  # a warm-up on the capture stream (per-stream handles and workspaces)
            for inputs in input_sets:
                fn(*inputs)
        torch.cuda.current_stream(device).wait_stream(stream)
        torch.cuda.synchronize(device)
        work = capture_calls(fn, input_sets, buffers, stream)
        null = capture_calls(lambda *_: ready[0] if len(ready) == 1 else tuple(ready), input_sets, buffers, stream)

        def span(graph: Any) -> float:
            flush.zero_()
            _cuda_synchronize()
            start, end = _EventBase(enable_timing=True), _EventBase(enable_timing=True)
            _event_record(start, _current_stream(device))
            graph.replay()
            _event_record(end, _current_stream(device))
            _cuda_synchronize()
            return float(_event_elapsed(start, end))

        span(work)
        if not all(_close(got, want) for got_set, want_set in zip(buffers, outs)
                   for got, want in zip(got_set, want_set)):
            # Rationale: a capture can leave work out (a side stream the capture does not follow); a replay timed
            # on less work than the eager call does would make a slower baseline look fast
            raise GraphCaptureError("the replay's outputs differ from the eager call's")
        del outs
        return _null_subtracted(lambda: span(work), lambda: span(null), len(input_sets), clock="graph_events",
                                requests=requests, warmup_requests=warmup_requests, time_cap_s=time_cap_s)
