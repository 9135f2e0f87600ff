"""The requests of one evaluation: K calls back to back in every request, every call alike and checked.

Every request, whatever its calls are for (the first correctness calls, the probes with other magnitudes, signs or
shapes, the timed calls), goes the same way: fresh input values copied into each call's own shared buffers, the
outputs poisoned, the L2 flushed and the device idle, the same gap since the last request (`Cadence`), one `calls`
request of K calls, the candidate frozen as soon as it answers; then the judge computes the reference on its own
copy of each call's inputs and checks the outputs, the inputs and the canaries. Nothing the candidate can observe
differs between a request that decides correctness and one that is timed: all are checked, and which ones are timed
or kept for the precision probe is decided after they return (the kept calls by reservoir sampling over every call
of the run).

The judge's clock is the only clock: a request's time is the judge's wall clock from sending it to having its own
copy of the outputs, and a call's time is that span less the same span of the runner's null model (same K, same
buffers, ready-made outputs) divided by K (`measure.judge_times`). K is fixed before any candidate code loads, from
the reference's own time, so the per-request overhead (the channel, waking the process, the one synchronisation)
is shared by many calls instead of added to each.

On a GPU the timed requests are, where the candidate's forward can be captured, replays of one CUDA graph that holds
the request's K calls and the runner's output copies, captured after the warm-up requests on the same buffers
(`capture`); the null model's requests are replays of its own graph. Then no host code of the candidate's runs in a
timed request at all, and the span less the null span is the calls' device work. A replay is a request like any
other: fresh inputs in the same buffers, every call checked.
"""
from __future__ import annotations

import copy
import json
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.judge import compare, memory, precision, reference
from cuda_agent.evaluator.judge.buffers import BufferSet, region_ids
from cuda_agent.evaluator.judge.candidate import CandidateGone, CandidateProcess
from cuda_agent.evaluator.judge.depth import Depth, accumulation_depth
from cuda_agent.evaluator.rules import RuleViolation

_perf = time.perf_counter
# a call kept for the precision probe: its inputs and outputs, or (judged at once) its verdict
Kept = tuple[list[Any], list[torch.Tensor]] | precision.PrecisionVerdict
TRIVIAL_SIGNAL_LIMIT = 0.05      # error above 5% of the output's own variation, while passing only by tolerance
PRECISION_STASH = 3              # calls kept (inputs and outputs) for the float64 probe after the loop
INVENTORY_MIN_S = 1.0            # less time than this left: the kernel audit's question is not asked (timeout)
INLINE_PROBE_ROOM = 5            # a call is judged at once where five times its bytes are free (float64 copies)
SNAPSHOT_TOGETHER_ELEMENTS = 1 << 24  # outputs up to this size are copied by the judge in one launch per dtype


class CallFailed(Exception):
    """The candidate raised, crashed or hung during a call; ``stage`` is the result stage."""

    def __init__(self, stage: str, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.log = log


@dataclass
class Sample:
    """One request on the judge's clock: its wall milliseconds (sending to the judge's copy of the outputs) and
    its number of calls; ``reported_ms`` is what the candidate's process said (diagnostics, never a verdict)."""

    label: str
    wall_ms: float
    calls: int
    reported_ms: float = math.nan
    reported_host_ms: float = math.nan
    stamps: dict[str, float] = field(default_factory=dict)
    graph: bool = False  # a replay of a captured graph (the null spans subtracted must be replays too)


@dataclass
class Call:
    """One call of a request: its buffers (used by no other call of the same request), its fresh inputs, what it is
    for (``label``, and ``rule`` for a variant), and whether it may be kept for the precision probe."""

    bufset: BufferSet
    inputs: list[Any]
    label: str
    keep: bool = False
    rule: str = ""      # a variant's rule, fired when the call is wrong (empty for ordinary calls)
    zero_mean: bool = False  # a zero-mean call: kept for the precision contract's zero-mean rule
    token: int = 0


@dataclass
class Outcome:
    """The result of one checked call."""

    ok: bool
    reason: str = ""
    comparison: compare.Comparison | None = None


@dataclass
class JudgeState:
    """What the checks found so far."""

    violations: list[RuleViolation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    max_abs: float = 0.0
    max_rel: float = 0.0
    calls_checked: int = 0
    precision: dict[str, Any] = field(default_factory=dict)  # how close the candidate came to the precision bounds
    work_seconds: dict[str, float] = field(default_factory=dict)  # the judge's own work around the requests, by kind
    # where the precision probe's kept calls went (`Session._kept`): a count per placement, the largest call's GiB
    # (call_gib) and the least allocatable device memory seen at a placement (least_free_gib); diagnostics
    stash: dict[str, float] = field(default_factory=dict)

    def placed(self, where: str, need: int = 0, free: int | None = None) -> None:
        self.stash[where] = self.stash.get(where, 0) + 1
        if need:
            self.stash["call_gib"] = round(max(self.stash.get("call_gib", 0.0), need / 2**30), 3)
        if free is not None:
            least = self.stash.get("least_free_gib")
            self.stash["least_free_gib"] = round(free / 2**30 if least is None else min(least, free / 2**30), 3)

    def absorb(self, other: "JudgeState") -> None:
        """Add ``other``'s diagnostics (work seconds, stash placements) to this state's: a trial replay's, whose
        verdicts are kept apart."""
        for kind, seconds in other.work_seconds.items():
            self.work_seconds[kind] = self.work_seconds.get(kind, 0.0) + seconds
        for key, value in other.stash.items():
            earlier = self.stash.get(key)
            self.stash[key] = value if earlier is None else (
                min(earlier, value) if key == "least_free_gib" else
                max(earlier, value) if key == "call_gib" else earlier + value)

    def fire(self, rule: str, detail: str) -> None:
        if len(self.violations) < 40 and not any(v.rule == rule and v.detail == detail for v in self.violations):
            self.violations.append(RuleViolation(rule, detail))

    def check(self, name: str) -> None:
        if name not in self.checks:
            self.checks.append(name)


class Cadence:
    """The same gap before every call: the judge's work between calls (fresh inputs, the reference, the checks) is
    alike for every call, and the remaining differences are padded to a running target, so the time since the last
    call says nothing about what the judge did with it."""

    def __init__(self, limit_s: float = 0.05) -> None:
        self.limit_s = limit_s
        self.target_s = 0.0
        self.last_reply: float | None = None

    def wait(self) -> None:
        if self.last_reply is None:
            return
        gap = _perf() - self.last_reply
        target = min(self.target_s, self.limit_s)
        if gap < target:
            time.sleep(target - gap)
        self.target_s = max(self.target_s * 0.9, gap * 1.05)

    def replied(self) -> None:
        self.last_reply = _perf()


class Session:
    """Drives the calls of one evaluation against one candidate process."""

    def __init__(self, *, proc: CandidateProcess, config: EvalConfig, device: torch.device, module: Any,
                 ref_model: torch.nn.Module, fp32: bool, deadline: float, state: JudgeState,
                 seed: Callable[[], int], constant_output: bool = False) -> None:
        self.proc = proc
        self.config = config
        self.device = device
        self.cuda = device.type == "cuda"
        self.module = module
        self.ref_model = ref_model
        self.fp32 = fp32
        self.deadline = deadline
        self.state = state
        self.seed = seed
        self.constant_output = constant_output
        self.cadence = Cadence()
        self.ids = region_ids()
        self.sets: list[BufferSet] = []
        self.samples: list[Sample] = []
        self.null_samples: list[Sample] = []
        self.copied_tokens: list[int] = []
        self.stash: list[Kept] = []
        self.keepable = 0
        self.last_stamps: dict[str, float] = {}
        self.history: list[Sample] = []  # every request of the candidate's, timed or not
        self.zero_mean_kept: list[Kept] = []
        self.ref_error: float | None = None
        self.depth: Depth | None = None                    # the reference's accumulation depth (the contract's floor)
        self._ref64: torch.nn.Module | None = None  # the reference in float64, made at the first call that needs it
        self.float64_rescued = 0                    # calls outside the float32 reference's tolerance, within float64's
        self.call_errors: list[float] = []
        self.earlier: list[Any] = []
        self.token = 0
        self.first_failure = ""
        self.graph: int | None = None          # the candidate's captured request, when capture succeeded
        self.graph_keys: list[str] = []        # the buffers and values of its calls
        self.graph_metas: list[Any] = []       # what the capture said of each call's outputs (the candidate's word)
        self.graph_requests: list[tuple[int, int]] = []  # (first token, output copies) of every replayed request
        self.capture_tokens: list[int] = []    # the calls made while capturing (their operators are audited)
        self.replayed_tokens: set[int] = set()  # the calls of replayed requests (their records are the replay's)
        self._null_graphs: dict[int, tuple[int, list[str]]] = {}
        self._snapshots: dict[int, list[torch.Tensor]] = {}  # per buffer set, the judge's copy of its outputs
        self._snapshot_plans: dict[tuple[int, ...], Any] = {}  # per request's sets: how `_snapshot` copies them
        self._flush_buf: torch.Tensor | None = None
        self._flush_ms: float | None = None    # one flush's device time (`_warm_device`)
        self._rng = random.SystemRandom()
        self._lap_at = _perf()

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _lap(self, kind: str) -> None:
        """The host seconds since the last lap added to ``state.work_seconds[kind]`` (diagnostics: where the judge's
        own work around the requests goes; each kind ends where the judge reads a device value or synchronises, so
        device work is counted where it is waited for). No synchronisation of its own."""
        self._lap_at = add_lap(self.state.work_seconds, kind, self._lap_at)

    def start_laps(self) -> None:
        """`_lap` counts from here (the first request of the calls phase)."""
        self._lap_at = _perf()

    def remaining(self) -> float:
        return max(0.05, self.deadline - time.monotonic())

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _flush(self) -> None:
        """The L2 flushed and the device idle before every call (the judge's own work is done)."""
        if not self.cuda:
            return
        if self._flush_buf is None:
            from cuda_agent.evaluator.timing import l2_flush_bytes

            self._flush_buf = torch.empty(l2_flush_bytes(self.device), dtype=torch.int8, device=self.device)
        self._flush_buf.zero_()
        torch.cuda.synchronize(self.device)

    def _warm_device(self) -> None:
        """With ``config.warm_device_ms``: the judge's own L2 flushes for about that long, then the device idle, right
        before a request is sent (every request alike; diagnostics of the clock until measured, see EvalConfig)."""
        if not self.cuda or self.config.warm_device_ms <= 0 or self._flush_buf is None:
            return
        if self._flush_ms is None:  # one flush's device time, measured once
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self._flush_buf.zero_()
            end.record()
            torch.cuda.synchronize(self.device)
            self._flush_ms = max(start.elapsed_time(end), 1e-3)
        for _ in range(max(1, min(1000, round(self.config.warm_device_ms / self._flush_ms)))):
            self._flush_buf.zero_()
        torch.cuda.synchronize(self.device)

    def buffers_for(self, inputs: list[Any]) -> BufferSet:
        """A new buffer set shaped like ``inputs`` (and the reference's outputs on them), shared with the candidate."""
        with torch.no_grad():
            outputs = self.ref_model(*inputs)
        self._sync()
        bufset = BufferSet(inputs, compare.flatten(outputs), self.device, self.ids)
        del outputs
        self.sets.append(bufset)
        reply = self.proc.share(bufset.regions, timeout=self.remaining())
        if not reply.get("ok"):
            raise CallFailed(str(reply.get("stage", "eval_error")), str(reply.get("reason", "sharing failed")),
                             str(reply.get("log", "")))
        return bufset

    def reserve_request_memory(self, bufsets: list[BufferSet]) -> None:
        """The buffers of the judge's copies of a whole request's outputs (`_snapshot`), on every set, allocated
        before any candidate code loads and kept. Rationale: made only at the first request, they failed where the
        candidate had taken the free memory by then (`judge.memory`)."""
        if not self.cuda:
            return
        for bufset in bufsets:
            self._snapshot_buffers(bufset)
        self._sync()

    def _snapshot_buffers(self, bufset: BufferSet) -> list[torch.Tensor]:
        """The judge's buffers for its copy of ``bufset``'s outputs, made at the set's first use and kept (every
        buffer set lives in ``self.sets`` for the whole session, so its id names it)."""
        held = self._snapshots.get(id(bufset))
        if held is None:
            held = self._snapshots[id(bufset)] = [torch.empty_like(slot.view) for slot in bufset.outputs]
        return held

    def _snapshot(self, bufsets: list[BufferSet]) -> list[list[torch.Tensor]]:
        """The judge's copy of every call's outputs, into its kept buffers (valid until the next request), in a few
        launches whatever K is: small outputs copied together per dtype (`torch._foreach_copy_`), large ones one by
        one; which is which is worked out once per list of sets, not inside the clock of every request. Rationale
        (H200, 2026-12-04): one clone per output made the copy's host time grow with K (256 launches, 2.3-4.3 ms a
        request) and differ between the null model's requests and the candidate's by 1.4 ms on gpu/honest_row_sum,
        5 us a call at K 256: the judge then timed a 19 us kernel 23% fast."""
        key = tuple(id(bufset) for bufset in bufsets)
        plan = self._snapshot_plans.get(key)
        if plan is None:
            copies = [self._snapshot_buffers(bufset) for bufset in bufsets]
            together: dict[torch.dtype, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
            alone: list[tuple[torch.Tensor, torch.Tensor]] = []
            for bufset, held in zip(bufsets, copies):
                for slot, dst in zip(bufset.outputs, held):
                    if dst.numel() <= SNAPSHOT_TOGETHER_ELEMENTS and dst.is_contiguous() and \
                            slot.view.is_contiguous():
                        group = together.setdefault(dst.dtype, ([], []))
                        group[0].append(dst)
                        group[1].append(slot.view)
                    else:
                        alone.append((dst, slot.view))
            plan = self._snapshot_plans[key] = (copies, list(together.values()), alone)
        copies, together_lists, alone = plan
        with torch.no_grad():
            for dst, src in alone:
                dst.copy_(src)
            for dsts, srcs in together_lists:
                torch._foreach_copy_(dsts, srcs)
        return copies

    def _request(self, message: dict[str, Any], bufsets: list[BufferSet]) -> tuple[dict[str, Any], float,
                                                                                     list[list[Any]]]:
        """The request, then at once (the candidate frozen) the judge's own copy of every call's outputs; the wall
        clock stops when that copy is done. Rationale: a candidate that answers before its device work is finished
        (its synchronisation patched or its symbols redirected) gains nothing: its work either lands inside the
        judge's clock (the copy runs after it on the device) or is missing from the copy the judge checks."""
        self.cadence.wait()
        self._warm_device()
        sent = _perf()
        try:
            reply, wall_ms = self.proc.call(message, timeout=self.remaining())
        except CandidateGone as exc:
            raise CallFailed(exc.stage, exc.reason, exc.log) from exc
        start = _perf()
        snapshots = self._snapshot(bufsets)
        self._sync()
        wall_ms += (_perf() - start) * 1e3
        self.last_stamps = _breakdown(sent, start, _perf(), reply.get("stamps"))
        self.cadence.replied()
        if not reply.get("ok"):
            raise CallFailed(str(reply.get("stage", "runtime_error")), str(reply.get("reason", ""))[:2000],
                             str(reply.get("log", ""))[:8000])
        return reply, wall_ms, snapshots

    @staticmethod
    def _reported(reply: dict[str, Any]) -> float:
        values = reply.get("event_ms")
        if isinstance(values, list) and values and all(isinstance(v, (int, float)) for v in values):
            total = float(sum(values))
            return total if math.isfinite(total) else math.nan
        return math.nan

    # -- calibration --------------------------------------------------------------------------------------------
    def capture(self, bufsets: list[BufferSet], make_inputs: Callable[[], list[Any]], *,
                null: bool = False) -> tuple[int | None, str]:
        """One CUDA graph, in the candidate's process, of a request's calls on ``bufsets`` (the candidate's forward,
        or the null model's with ``null``) and the runner's output copies: its number and "", or None and why capture
        failed (a failure is no verdict: the requests are then launched from the host, as eager calls are)."""
        specs = []
        for bufset in bufsets:
            self.token += 1
            values = make_inputs()
            bufset.load(values)
            specs.append(bufset.call_spec(values, self.token))
            if not null:
                self.capture_tokens.append(self.token)
        message = {"op": "capture", "calls": specs, "null": null}
        try:
            reply, _ = self.proc.call(message, timeout=self.remaining())
        except CandidateGone as exc:
            raise CallFailed(exc.stage, exc.reason, exc.log) from exc
        if not reply.get("ok"):
            if null:  # the runner's own model: no verdict on the candidate, only no graph clock
                return None, str(reply.get("reason", ""))[:600]
            raise CallFailed(str(reply.get("stage", "runtime_error")), str(reply.get("reason", ""))[:2000],
                             str(reply.get("log", ""))[:8000])
        number = reply.get("graph")
        if not isinstance(number, int) or isinstance(number, bool):
            return None, str(reply.get("reason") or "no graph")[:600]
        keys = [spec_key(spec) for spec in specs]
        if null:
            self._null_graphs[len(bufsets)] = (number, keys)
        else:
            metas = reply.get("calls")
            if not isinstance(metas, list) or len(metas) != len(bufsets):
                return None, "the capture's reply does not describe its calls"
            self.graph, self.graph_keys, self.graph_metas = number, keys, metas
            self.copied_tokens.extend(self.capture_tokens[-len(bufsets):])
        return number, ""

    def release(self) -> None:
        """The candidate's graphs dropped in its process (their memory freed): from here on its requests are
        host-launched. A failure here shows in the next request."""
        self.graph, self.graph_keys, self.graph_metas = None, [], []
        try:
            self.proc.call({"op": "release"}, timeout=min(self.remaining(), 30.0))
        except CandidateGone:
            pass

    def trial_replay(self, calls: list[Call]) -> str:
        """One replay of the captured graph, checked like any request but deciding nothing: "" where every call
        is right, else why not (then the caller times host-launched requests instead). Rationale: capture can
        succeed and still leave work out of the graph (a kernel launched on a stream the capture does not follow
        runs once, at capture time, and never again), so an honest forward could replay wrong; a forward that
        replays wrong on purpose only gets host-launched requests, every one of them checked as before."""
        graph = self.graph_for(calls)
        if graph is None:
            return "the task's inputs besides the tensors change from call to call" if self.graph else "no graph"
        kept = (self.state, list(self.earlier), list(self.call_errors))
        self.state = JudgeState()
        try:
            try:
                outcomes = self.request(calls, "trial replay", graph=graph)
            except CallFailed as exc:  # a replay that raised or hung: no verdict either (a dead process shows next)
                return f"{exc.stage}: {exc.reason}"[:600]
            wrong = next((o.reason for o in outcomes if not o.ok), "")
            fired = "; ".join(str(v) for v in self.state.violations[:2])
            return (wrong or fired)[:600]
        finally:
            kept[0].absorb(self.state)
            self.state, self.earlier, self.call_errors = kept[0], kept[1], kept[2]

    def graph_for(self, calls: list[Call]) -> int | None:
        """The captured graph that can answer a request of ``calls`` (the same buffers, in order, and the same
        values besides the tensors), else None."""
        if self.graph is None:
            return None
        keys = [spec_key(c.bufset.call_spec(c.inputs, 0)) for c in calls]
        return self.graph if keys == self.graph_keys else None

    def calibrate(self, bufsets: list[BufferSet], make_inputs: Callable[[], list[Any]], requests: int, *,
                  graph: bool = False) -> bool:
        """Requests of the runner's own null model, before the candidate's code is loaded (so nothing of the
        candidate's can slow them): the same K calls on the same buffers, each copying ready-made outputs, one
        synchronisation; their median span is the overhead `measure.judge_times` subtracts. The judge works around
        each as around a real request (fresh inputs, the flush, a reference and a comparison afterwards, the same
        cadence), so the device and the processes are in the same state as for the requests the overhead is
        subtracted from; both sides poll rather than sleep while a request is out (`channel.wait_readable`).
        ``graph``: the null requests are replays of the null model's captured graph (False where it could not be
        captured)."""
        if graph and len(bufsets) not in self._null_graphs:
            number, _why = self.capture(bufsets, make_inputs, null=True)
            if number is None:
                return False
        for _ in range(requests):
            inputs = [make_inputs() for _ in bufsets]
            specs = []
            for bufset, values in zip(bufsets, inputs):
                self.token += 1
                bufset.load(values)
                specs.append(bufset.call_spec(values, self.token))
            self._flush()
            message: dict[str, Any] = {"op": "calls", "calls": specs, "null": True}
            if graph:
                message = {"op": "calls", "graph": self._null_graphs[len(bufsets)][0], "first": specs[0]["token"]}
            reply, wall_ms, snapshots = self._request(message, bufsets)
            self.null_samples.append(Sample("null", wall_ms, len(bufsets), self._reported(reply),
                                            _number(reply.get("host_ms")), self.last_stamps, graph))
            del snapshots
            with torch.no_grad(), precision.exact_fp32():
                golden = self.ref_model(*inputs[0])
            compare.compare_outputs(golden, golden, self.config.tolerances)
            self._sync()
            del golden
        return True

    # -- one request --------------------------------------------------------------------------------------------
    def request(self, calls: list[Call], label: str, *, timed: bool = False, graph: int | None = None) -> list[Outcome]:
        """One request of ``calls`` (each on fresh inputs in its own buffers) and every check after it; with
        ``graph`` (from `graph_for`), answered by replaying the captured graph. Checking stops at the first call
        that is wrong; its outcome is the last of the list."""
        if len({id(c.bufset) for c in calls}) != len(calls):
            raise ValueError("Session.request: two calls of one request share buffers")
        self._lap("between_requests")
        specs = []
        for call in calls:
            self.token += 1
            call.token = self.token
            call.bufset.load(call.inputs)
            specs.append(call.bufset.call_spec(call.inputs, call.token))
        self._flush()
        self._lap("load_inputs")
        message: dict[str, Any] = {"op": "calls", "calls": specs}
        if graph is not None:
            # the buffers are the capture's (`graph_for`), so the replay needs no specs; it answers no metadata
            # either, the capture's stands for every replay
            message = {"op": "calls", "graph": graph, "first": calls[0].token}
            self.graph_requests.append((calls[0].token, sum(len(c.bufset.outputs) for c in calls)))
            self.replayed_tokens.update(c.token for c in calls)
        reply, wall_ms, snapshots = self._request(message, [c.bufset for c in calls])
        self._lap("request")
        if graph is not None:
            reply = {**reply, "calls": self.graph_metas}
        sample = Sample(label, wall_ms, len(calls), self._reported(reply), _number(reply.get("host_ms")),
                        self.last_stamps, graph is not None)
        self.history.append(sample)
        if timed:
            self.samples.append(sample)
        metas = reply.get("calls")
        if not isinstance(metas, list) or len(metas) != len(calls):
            raise CallFailed("runtime_error", f"{label}: the candidate's process answered "
                                              f"{len(metas) if isinstance(metas, list) else 'no'} call results for "
                                              f"{len(calls)} calls")
        outcomes: list[Outcome] = []
        for call, meta, snapshot in zip(calls, metas, snapshots):
            meta = meta if isinstance(meta, dict) else {}
            if all(isinstance(o, dict) and ("copied" in o or "shape" not in o) for o in meta.get("outs") or []):
                self.copied_tokens.append(call.token)
            outcome = self._check(call, meta, snapshot)
            # Rationale: outputs written after the reply (device work still running when the candidate answered, or
            # started later) differ from the judge's copy taken at the reply.
            for slot, copy_ in zip(call.bufset.outputs, snapshot):
                if not compare.tensors_equal(slot.view, copy_):
                    self.state.fire("work_after_return", f"{call.label}: {slot.name} changed after the reply")
            self._lap("checks")
            outcomes.append(outcome)
            if not outcome.ok:
                break
        return outcomes

    def _check(self, call: Call, reply: dict[str, Any], snapshot: list[Any]) -> Outcome:
        state = self.state
        bufset, inputs, label = call.bufset, call.inputs, call.label
        state.calls_checked += 1
        # Rationale: out-of-bounds writes corrupt neighbouring memory (and could plant results for later calls).
        for name in bufset.broken_canaries():
            state.fire("out_of_bounds_write", f"{label}: the canary bytes around {name} were overwritten")
        self._lap("checks")
        with torch.no_grad(), precision.exact_fp32():
            golden = self.ref_model(*inputs)
        self._sync()
        self._lap("reference")
        candidate, problem = self._candidate_outputs(bufset, golden, reply, snapshot)
        if problem:
            return Outcome(False, f"{label}: {problem}")
        comparison = compare.compare_outputs(candidate, golden, self.config.tolerances)
        if not comparison.ok:
            # judged against float64 from here on where that holds (the every-call precision record included)
            comparison, golden = self._against_float64(label, inputs, candidate, golden, comparison)
        self._lap("compare")
        if math.isfinite(comparison.max_abs):
            state.max_abs = max(state.max_abs, comparison.max_abs)
        if math.isfinite(comparison.max_rel):
            state.max_rel = max(state.max_rel, comparison.max_rel)
        # Rationale: mutating inputs can smuggle state between calls or destroy what the reference needs.
        for name in bufset.mutated_inputs(inputs):
            state.fire("input_mutation", f"{label}: forward modified {name}")
        if comparison.ok and not self.constant_output:
            # Rationale: tiny outputs. Where a constant would pass the tolerance, the error is judged against the
            # output's own variation.
            for leaf in self._trivial_leaves(comparison, inputs, candidate, golden):
                state.fire("trivial_output", f"{label}: {leaf.path} passes the tolerance only because the "
                                             f"outputs are tiny; its error is {leaf.signal_rel_error:.2f} of the "
                                             "output's variation")
        if not comparison.ok:
            mark = compare.fingerprint(candidate)
            if mark is not None and mark in self.earlier:
                # Rationale: a wrong answer equal to an earlier call's (correct) answer is a result reused for new
                # inputs.
                state.fire("cached_output", f"{label}: forward returned the result of an earlier call")
        else:
            self._lap("checks")
            if call.keep:
                self._reservoir(inputs, snapshot, label)
            elif call.zero_mean and len(self.zero_mean_kept) < PRECISION_STASH:
                self.zero_mean_kept.append(self._kept(inputs, snapshot, zero_mean=True, label=label))
            self._lap("keep_for_probe")
            if not call.zero_mean:  # judged against float64 after the run (its reference error is another scale)
                self._record_error(candidate, golden, inputs)
            self._lap("precision_every_call")
            if len(self.earlier) < 64:
                self.earlier.append(compare.fingerprint(candidate))
        del golden
        return Outcome(comparison.ok, f"{label}: {comparison.reason}" if not comparison.ok else "", comparison)

    def _trivial_leaves(self, comparison: compare.Comparison, inputs: list[Any], candidate: Any,
                        golden: Any) -> list[compare.LeafReport]:
        """The output leaves that pass only because the outputs are tiny: error above `TRIVIAL_SIGNAL_LIMIT` of the
        output's own variation, against the float32 reference and, for an fp32 task, against the float64 one too.
        Rationale: where an output varies little (L2/42 on inputs scaled by 0.01: a logsumexp of 128 near-equal
        channel means, 16 values), the float32 reference's own rounding is a large part of that variation, and a
        kernel that computes in float64 was refused as trivial (error 0.61 of the variation, H200, 2026-12-04); a
        constant output is as far from the float64 result's variation as from the float32 one's."""
        suspects = [leaf for leaf in comparison.leaves
                    if leaf.reference_tiny and leaf.signal_rel_error > TRIVIAL_SIGNAL_LIMIT]
        if not suspects or comparison.lazy or not (self.fp32 and self.config.precision_probe):
            return suspects
        truth = self._float64_reference(inputs, golden)
        if truth is None:
            return suspects
        again = {leaf.path: leaf for leaf in compare.compare_outputs(candidate, truth, self.config.tolerances).leaves}
        return [again.get(leaf.path, leaf) for leaf in suspects
                if again.get(leaf.path) is None or again[leaf.path].signal_rel_error > TRIVIAL_SIGNAL_LIMIT]

    def _against_float64(self, label: str, inputs: list[Any], candidate: Any, golden: Any,
                         comparison: compare.Comparison) -> tuple[compare.Comparison, Any]:
        """For an fp32 task, a call outside the tolerance of the float32 reference judged once more against the
        reference computed in float64 (TF32 off), with the same tolerance: the comparison that holds and the
        reference it holds against (the float64 one, in float32, where the candidate is within the tolerance of
        it). Rationale: the float32 reference is not the true result; where its own rounding exceeds the
        tolerance (a sum of large terms that cancel: KernelBench L2/14 on inputs scaled by -3, about 0.05 off), a
        kernel that computes more exactly (float64 accumulation) was refused, once in three runs on the H200
        (2026-12-03). A wrong result is about as far from one reference as from the other."""
        if comparison.lazy or not comparison.leaves or not (self.fp32 and self.config.precision_probe):
            return comparison, golden
        truth = self._float64_reference(inputs, golden)
        if truth is None:
            return comparison, golden
        again = compare.compare_outputs(candidate, truth, self.config.tolerances)
        if not again.ok:
            return comparison, golden
        self.float64_rescued += 1
        if self.float64_rescued == 1:
            outside = f"{label}: outside the tolerance of the float32 reference ({comparison.reason}"[:300]
            self.state.notes.append(outside + "), within it of the float64 reference: the float32 reference's own "
                                              "rounding, judged against float64")
        return again, truth

    def _float64_reference(self, inputs: list[Any], golden: Any) -> Any:
        """The reference computed in float64 (TF32 off) on ``inputs``, in ``golden``'s structure and dtypes; None
        where it cannot be (an operator without a float64 kernel, or no memory for it)."""
        try:
            if self._ref64 is None:
                self._ref64 = copy.deepcopy(self.ref_model).double()
            with torch.no_grad(), precision.exact_fp32():
                out64 = self._ref64(*precision.widen(inputs, self.device))
            return _rebuild(golden, [v64.to(v32.dtype) if isinstance(v32, torch.Tensor) and
                                     isinstance(v64, torch.Tensor) and v32.dtype.is_floating_point else v32
                                     for (_, v32), (_, v64) in zip(compare.flatten(golden), compare.flatten(out64))])
        except Exception:  # noqa: BLE001 - the float32 judgement stands
            return None

    def _candidate_outputs(self, bufset: BufferSet, golden: Any, reply: dict[str, Any],
                           snapshot: list[Any]) -> tuple[Any, str]:
        """The candidate's outputs as the judge reads them (shared buffers for tensors, reported values for the
        rest), shaped like the reference's; or a reason why they cannot be compared."""
        leaves = compare.flatten(golden)
        meta = reply.get("outs")
        if not isinstance(meta, list) or len(meta) != len(leaves):
            count = len(meta) if isinstance(meta, list) else "?"
            return None, f"forward returned {count} output value(s), the reference returns {len(leaves)}"
        values: list[Any] = []
        copies = iter(snapshot)
        for (path, ref), got in zip(leaves, meta):
            got = got if isinstance(got, dict) else {}
            if isinstance(ref, torch.Tensor):
                copy_ = next(copies)
                if not got.get("copied"):
                    return None, _why_not_copied(path, got, ref)
                values.append(copy_)
            else:
                values.append(got.get("value"))
        return _rebuild(golden, values), ""

    def _kept(self, inputs: list[Any], outputs: list[Any], into: Kept | None = None, *, zero_mean: bool = False,
              label: str = "") -> Kept:
        """A call kept for the precision probe: a copy on the device where it fits within
        ``EvalConfig.probe_stash_share`` of the device's memory (``into``: a kept call it replaces, written in place
        where it is on the device and every shape and dtype matches); else judged at once under the precision
        contract, its verdict kept instead of its tensors, where the device has room for the float64 copies; else a
        copy in host memory (the probe runs after the candidate's process has ended, when its device memory is free
        again). Rationale: a candidate that hoards device memory must not switch the probe off; on the 6 GiB
        level-1 tasks (13 GB a call) copies to host memory cost 36 s of a 39 s calls phase (L1/19 at K = 1, H200,
        2026-12-04), and counting the allocator's cached memory as free, to keep them on the device instead, left
        the judge's own float64 reference no room (out of memory)."""
        if isinstance(into, tuple) and (not self.cuda or _kept_bytes(into)) and \
                _same_layout([*inputs, *outputs], [*into[0], *into[1]]):
            with torch.no_grad():
                kept_inputs = [dst.copy_(src) if isinstance(src, torch.Tensor) else src
                               for src, dst in zip(inputs, into[0])]
                for src, dst in zip(outputs, into[1]):
                    dst.copy_(src)
            self.state.placed("in_place")
            return kept_inputs, into[1]
        if not self.cuda:
            self.state.placed("copy")
            return _copied(inputs, outputs, torch.Tensor.clone)
        need = sum(x.numel() * x.element_size() for x in [*inputs, *outputs] if isinstance(x, torch.Tensor))
        free = memory.allocatable(self.device)
        held = sum(_kept_bytes(k) for k in [*self.stash, *self.zero_mean_kept] if k is not into)
        if 3 * need < free and held + need <= self.config.probe_stash_share * \
                torch.cuda.get_device_properties(self.device).total_memory:
            self.state.placed("device", need, free)
            return _copied(inputs, outputs, torch.Tensor.clone)
        if INLINE_PROBE_ROOM * need < free:
            self.state.placed("judged_at_once", need, free)
            pair = (inputs, outputs)
            return precision.judge_precision(self.ref_model, [] if zero_mean else [pair], [pair] if zero_mean else [],
                                             self.device, depth=self.depth, labels=[label or "kept call"])
        self.state.placed("host", need, free)
        return _copied(inputs, outputs, lambda t: t.to("cpu"))

    def _reservoir(self, inputs: list[Any], outputs: list[Any], label: str = "") -> None:
        """Reservoir sampling (algorithm R) over every keepable call of the run: after n such calls each of them is
        in the stash with probability PRECISION_STASH / n, whatever the run's length, so a behaviour that changes
        after the first N calls is as likely to be probed as one that changes before. Rationale: a probe that
        keeps the first calls misses a kernel that is exact at first and lowers its precision later."""
        self.keepable += 1
        if len(self.stash) < PRECISION_STASH:
            self.stash.append(self._kept(inputs, outputs, label=label))
            return
        slot = self._rng.randrange(self.keepable)
        if slot < PRECISION_STASH:
            self.stash[slot] = self._kept(inputs, outputs, into=self.stash[slot], label=label)

    # -- precision ------------------------------------------------------------------------------------------------
    def calibrate_precision(self, input_sets: list[list[Any]]) -> None:
        """The fp32 reference's own error against float64 (TF32 off), on the judge's inputs, before any candidate
        code loads: the scale every call's error against the fp32 reference is judged by (`_record_error`)."""
        if not (self.fp32 and self.config.precision_probe):
            return
        try:
            with precision.exact_fp32():
                self.depth = accumulation_depth(self.ref_model, input_sets[0])
                ref64 = copy.deepcopy(self.ref_model).double()
                errors = []
                for inputs in input_sets:
                    with torch.no_grad():
                        out32 = [v for _, v in compare.flatten(self.ref_model(*inputs))]
                        out64 = [v for _, v in compare.flatten(ref64(*precision.widen(inputs, self.device)))]
                    for r32, r64 in zip(out32, out64):
                        if isinstance(r64, torch.Tensor) and r64.dtype.is_floating_point and r64.numel():
                            errors.append(precision.rel_error(r32, r64))
                del ref64
            self._sync()
            finite = [e for e in errors if math.isfinite(e)]
            if finite:
                self.ref_error = max(finite)
        except Exception as exc:  # noqa: BLE001 - some ops have no float64 kernel
            self.state.notes.append(f"per-call precision check off: the reference does not run in float64 ({exc})"[:300])

    def _record_error(self, candidate: Any, golden: Any, inputs: list[Any]) -> None:
        """Every call's relative error against the fp32 reference (computed with TF32 off), kept per call; the
        verdict (`precision_verdict`) compares the largest with the calibrated scale. Where a call's error is above
        that limit, its error against the float64 reference is kept instead (the contract's own quantity: the fp32
        reference can be far from the truth on a call, all zeros where the true result is not). Rationale: checking
        every call leaves no call where lowered precision goes unseen."""
        if self.ref_error is None:
            return
        worst = _worst_error(candidate, golden)
        limit = self._precision_limit()
        if worst > limit and not any(e > limit for e in self.call_errors):  # once one call is over, the rule fires
            truth = self._float64_reference(inputs, golden)
            if truth is not None:
                worst = _worst_error(candidate, truth)
        self.call_errors.append(worst)

    def _precision_limit(self) -> float:
        """The largest relative error against the fp32 reference a call may have (`precision_verdict`)."""
        # the contract's magnitude bound against float64, plus the reference's own error (the triangle inequality),
        # with the calibrated reference error doubled: a call's own reference error varies with its inputs
        ref_error = 2.0 * (self.ref_error or 0.0)
        return precision.CONTRACT.bound(ref_error, self.depth) + ref_error

    def precision_verdict(self) -> None:
        """Rationale: lowered precision (TF32, bf16, fp16 operands) passes a 1e-2 tolerance on benign inputs. A
        call whose error against the fp32 reference exceeds the contract's magnitude bound (`precision.CONTRACT`)
        plus the fp32 reference's own error has an error against float64 above that bound, by the triangle
        inequality: not an fp32 computation, whichever call it is."""
        if self.ref_error is None or not self.call_errors:
            return
        limit = self._precision_limit()
        worst = max(self.call_errors)
        self.state.check("precision_every_call")
        self.state.precision.update(every_call_worst=worst, every_call_limit=limit,
                                    every_call_headroom=worst / limit if limit > 0 else None,
                                    floor_units=precision.CONTRACT.floor_for(self.depth) / precision.FP32_UNIT,
                                    depth=None if self.depth is None else self.depth.describe())
        if worst > limit:
            count = sum(e > limit for e in self.call_errors)
            self.state.fire("lowered_precision", f"{count} of {len(self.call_errors)} calls: relative error against "
                                                 f"the fp32 reference (float64 where that is far off) up to "
                                                 f"{worst:.2e}; the fp32 reference's own "
                                                 f"error against float64 is {self.ref_error:.2e} (limit {limit:.2e}"
                                                 f"{'' if self.depth is None else ', ' + self.depth.describe()})")

    # -- probes -------------------------------------------------------------------------------------------------
    def precision_probe(self) -> None:
        """Rationale: lowered precision. The precision contract (`judge.precision`: magnitude against float64 and
        the operand-rounding signature) on the calls kept by reservoir sampling over the whole run and on the
        zero-mean calls, after the loop (the candidate's process has ended: its memory is free again)."""
        if not (self.fp32 and self.config.precision_probe and (self.stash or self.zero_mean_kept)):
            return
        move = lambda pair: ([x.to(self.device) if isinstance(x, torch.Tensor) else x for x in pair[0]],  # noqa: E731
                             [o.to(self.device) for o in pair[1]])
        judged = [k for k in [*self.stash, *self.zero_mean_kept] if isinstance(k, precision.PrecisionVerdict)]
        try:
            own = [move(p) for p in self.stash if isinstance(p, tuple)]
            zero = [move(p) for p in self.zero_mean_kept if isinstance(p, tuple)]
            if own or zero:
                judged.append(precision.judge_precision(self.ref_model, own, zero, self.device, depth=self.depth))
        finally:
            self.stash.clear()
            self.zero_mean_kept.clear()
        verdict = precision.merge_verdicts(judged)
        self.state.notes.extend(verdict.notes)
        self.state.precision.update(precision.margins(verdict))
        if verdict.checked:
            self.state.check("precision_probe")
        for detail in verdict.violations:
            self.state.fire(precision.RULE, detail)

    def inventory(self) -> dict[str, Any]:
        """The kernel tap's records, per call token (the candidate's word; see `judge.kernels`). Raises `CallFailed`
        (``timeout``) where the evaluation's time is up before or while asking: no answer could come in time, which
        says nothing of the tap. Rationale (H200, 2026-12-04): the reference's own code, timed as the solution with
        0.1 s of the evaluation left (the judge had spent the rest on its own measurements), was refused as
        ``audit_evasion`` ("the kernel tap returned no records"), a -1 for the judge's lateness."""
        if self.deadline - time.monotonic() < INVENTORY_MIN_S:
            raise CallFailed("timeout", "the evaluation's time ran out before the kernel audit")
        try:
            return self.proc.request({"op": "inventory"}, timeout=min(self.remaining(), 60.0))
        except CandidateGone as exc:
            if time.monotonic() >= self.deadline:
                raise CallFailed("timeout", f"the evaluation's time ran out during the kernel audit "
                                            f"({exc.reason})") from exc
            return {"ok": False, "reason": exc.reason}

    def release_snapshots(self) -> None:
        """The judge's copy buffers (`_snapshot`) dropped, once no request follows (a later request makes new ones)."""
        self._snapshots.clear()
        self._snapshot_plans.clear()

    def close(self) -> None:
        self.release_snapshots()
        for bufset in self.sets:
            bufset.close()
        self.sets.clear()
        self._flush_buf = None


def add_lap(seconds: dict[str, float], kind: str, since: float) -> float:
    """``seconds[kind]`` grows by the host seconds since ``since`` (a `time.perf_counter` reading); returns now, the
    next lap's start. Diagnostics: where the judge's own work goes, by kind."""
    now = _perf()
    seconds[kind] = seconds.get(kind, 0.0) + now - since
    return now


def _copied(inputs: list[Any], outputs: list[Any], place: Callable[[torch.Tensor], torch.Tensor]) -> Kept:
    """A kept call: ``place`` applied to its tensors (the inputs' other values as they are)."""
    return [place(x) if isinstance(x, torch.Tensor) else x for x in inputs], [place(o) for o in outputs]


def _kept_bytes(kept: Any) -> int:
    """The device bytes a kept call holds (none for a verdict or a copy in host memory)."""
    if not isinstance(kept, tuple):
        return 0
    return sum(x.numel() * x.element_size() for x in [*kept[0], *kept[1]]
               if isinstance(x, torch.Tensor) and x.device.type == "cuda")


def _breakdown(sent: float, received: float, copied: float, stamps: Any) -> dict[str, float]:
    """Where a request's time went, in ms (diagnostics: the candidate's stamps are its word, on the host's monotonic
    clock, which both processes share)."""
    out = {"judge_copy": (copied - received) * 1e3}
    if isinstance(stamps, dict) and all(isinstance(stamps.get(k), (int, float)) for k in
                                        ("received", "started", "synced", "replied")):
        out.update(to_candidate=(stamps["received"] - sent) * 1e3, prepare=(stamps["started"] - stamps["received"]) * 1e3,
                   calls=(stamps["synced"] - stamps["started"]) * 1e3, reply=(stamps["replied"] - stamps["synced"]) * 1e3,
                   to_judge=(received - stamps["replied"]) * 1e3)
    return out


def spec_key(spec: dict[str, Any]) -> str:
    """A call's buffers and values without its token: what a captured graph is bound to (a request is replayed only
    where every call's key is the capture's)."""
    return json.dumps({"args": spec["args"], "outs": spec["outs"]}, sort_keys=True)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def _why_not_copied(path: str, got: dict[str, Any], ref: torch.Tensor) -> str:
    if "shape" not in got:
        return f"{path} is not a tensor ({got.get('type') or repr(got.get('value'))})"
    if not got.get("plain"):
        return f"{path} is a tensor subclass; return plain torch.Tensor outputs"
    if tuple(got["shape"]) != tuple(ref.shape):
        return f"{path} has shape {tuple(got['shape'])}, expected {tuple(ref.shape)}"
    if got.get("dtype") != str(ref.dtype).removeprefix("torch."):
        return f"{path} has dtype {got.get('dtype')}, expected {str(ref.dtype).removeprefix('torch.')}"
    return f"{path} is on {got.get('device')}, expected {ref.device.type}"


def _worst_error(candidate: Any, reference: Any) -> float:
    """The largest relative error (`precision.rel_error`) over the floating tensor outputs."""
    worst = 0.0
    for (_, cand), (_, ref) in zip(compare.flatten(candidate), compare.flatten(reference)):
        if isinstance(ref, torch.Tensor) and ref.dtype.is_floating_point and ref.numel() and \
                isinstance(cand, torch.Tensor) and cand.shape == ref.shape:
            worst = max(worst, precision.rel_error(cand, ref))
    return worst


def _rebuild(obj: Any, values: list[Any]) -> Any:
    """``values`` put into ``obj``'s container structure (no self-calling closure: its cell would keep the values
    alive until the garbage collector runs)."""
    return _rebuild_from(obj, iter(values))


def _rebuild_from(obj: Any, values: Any) -> Any:
    if type(obj) in (tuple, list):
        return type(obj)(_rebuild_from(x, values) for x in obj)
    return next(values)


def fresh_inputs(module: Any, seed: int, device: torch.device) -> list[Any]:
    return reference.make_inputs(module, seed, device)


def _same_layout(values: list[Any], kept: list[Any]) -> bool:
    """Whether ``kept`` can take ``values`` in place: as many, tensors where tensors are, each of the same shape and
    dtype."""
    if len(values) != len(kept):
        return False
    for value, old in zip(values, kept):
        if isinstance(value, torch.Tensor) != isinstance(old, torch.Tensor):
            return False
        if isinstance(value, torch.Tensor) and (value.shape != old.shape or value.dtype != old.dtype):
            return False
    return True
