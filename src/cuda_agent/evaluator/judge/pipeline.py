"""One evaluation, in the judge's process: reference, candidate process, calls, checks, timing, verdict.

The judge runs no candidate code. The order: the candidate's process starts (it imports torch meanwhile, and nothing
of the candidate's yet); the judge loads the task from ``task.code`` (never the workspace's model.py), decides
whether the task needs perturbed parameters (its outputs are constant at initialisation), builds the candidate in
the sandbox, measures the baselines if they are not cached (no candidate code loaded yet anywhere), then has the
candidate load and runs the calls (`session`). When the calls are done the candidate's process is ended before
eager PyTorch is timed again for the drift correction, so nothing of the candidate's can run on the device then.
"""
from __future__ import annotations

import gc
import logging
import math
import os
import random
import shutil
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from cuda_agent.errors import SandboxError, TaskError
from cuda_agent.evaluator import timing
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.judge import compare, degenerate, kernels, measure, memory, precision, reference
from cuda_agent.evaluator.judge.candidate import CandidateGone, CandidateProcess, take_spare
from cuda_agent.evaluator.judge.prepare import PrepareError, Prepared, prepare, restore, solution_kind
from cuda_agent.evaluator.judge.session import Call, CallFailed, JudgeState, Session, add_lap
from cuda_agent.evaluator.judge.static_hints import scan_source
from cuda_agent.evaluator.judge.values import encode
from cuda_agent.evaluator.result import EvalResult, continuous, failure, reward
from cuda_agent.evaluator.reward_schedule import REWARD_CORRECT, speedup_with_spread
from cuda_agent.sandbox.process import require_sandbox
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)
_perf = time.perf_counter
STARTUP_TIMEOUT_S = 120.0
NULL_REQUESTS = 12           # null-model requests of each K before the candidate loads (the overhead subtracted)
MIN_TIMED_REQUESTS = 5
MAX_TIMED_REQUESTS = 30
CHECK_COST_FACTOR = 3.0      # a request with its checks costs about this many times its calls' reference time
CPU_BATCH = 4                # K on a CPU, whatever the reference's time (see `_batch_sizes`)
ZERO_MEAN_CALLS = 2          # calls on zero-mean inputs, placed like the other variants (the precision contract)
REFERENCE_CLOCK_MARGIN_S = 5.0   # the reference's own evaluation ends this long before the evaluation's deadline
REFERENCE_CLOCK_MIN_S = 10.0     # and is not started with less time than this before its own end
CLOCK_FACTOR_LIMITS = (0.67, 1.5)  # a reference clock pair whose ratio is outside these is not used (nor cached)
MIN_CALLS = 16               # the fewest ordinary calls of any run (every one checked)


class PhaseClock:
    """Wall seconds per evaluation phase (``extra["phase_seconds"]`` of the result)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._name = ""
        self._start = 0.0

    def start(self, name: str) -> None:
        self.stop()
        self._name, self._start = name, _perf()

    def stop(self) -> None:
        if self._name:
            self.seconds[self._name] = self.seconds.get(self._name, 0.0) + _perf() - self._start
            self._name = ""


def resolve_device(name: str) -> torch.device:
    """The device named by the config, with its index (``cuda`` -> ``cuda:N``, the current device)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise TaskError(f"device {name!r} requested but CUDA is not available on this machine")
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    return device


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Evaluate ``job`` (task, solution, config as plain dicts) and return the EvalResult as a dict. Never raises
    for anything the candidate does; evaluator bugs end in stage 'eval_error' with the traceback in the log."""
    start = _perf()
    task = Task.from_dict(job["task"])
    config = EvalConfig.from_dict(job["config"])
    solution = Path(job["solution"]).resolve()
    waited = max(0.0, time.time() - float(job.get("started_unix", time.time())))  # the caller's clock started first
    deadline = time.monotonic() + config.timeout_s - waited
    try:
        result = Evaluation(task, solution, config, deadline, staged=job.get("prepared")).run()
    except PrepareError as exc:
        result = failure(task.id, exc.stage, exc.reason, log=exc.log, build_seconds=exc.build_seconds)
    except SandboxError as exc:
        result = failure(task.id, "eval_error", f"no sandbox for the candidate: {exc}")
    except torch.OutOfMemoryError as exc:
        result = failure(task.id, "eval_error", f"the judge ran out of memory (the reference itself): {exc}"[:500])
    except TaskError as exc:
        result = failure(task.id, "eval_error", f"the task itself failed: {exc}")
    except Exception as exc:  # noqa: BLE001 - the judge must always answer
        result = failure(task.id, "eval_error", f"evaluator error: {type(exc).__name__}: {exc}",
                         log=traceback.format_exc())
    kind = result.solution_kind or (job.get("prepared") or {}).get("fields", {}).get("kind", "")
    if not kind:
        try:
            kind = solution_kind(solution)
        except Exception:  # noqa: BLE001
            kind = ""
    result = replace(result, mode=config.mode, solution=str(solution), total_seconds=_perf() - start,
                     solution_kind=kind)
    _release_device_memory()
    return result.trimmed(config.max_log_chars).to_dict()


def _release_device_memory() -> None:
    """The memory this evaluation took on the GPU given back to the device. Rationale (seen on the H200): the
    allocator keeps what an evaluation freed reserved for this process, so a warm judge, or a caller that runs the
    judge in its own process, left the next evaluation's candidate (another process) without room for a task with
    inputs of gigabytes (L1/19_ReLU: 6.4 GB a set), which then ran out of memory."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


class Evaluation:
    def __init__(self, task: Task, solution: Path, config: EvalConfig, deadline: float, *,
                 staged: dict[str, Any] | None = None, reference_at_batch: int | None = None) -> None:
        self.task = task
        # the task's reference timed as a candidate at the outer evaluation's K (`_reference_on_judge_clock`): no
        # baselines of its own
        self.reference_at_batch = reference_at_batch
        self.reference_clock: Any = None  # the reference on the judge's clock and in-process (`_clock_factor`)
        self.reference_clock_phases: dict[str, float] = {}  # where the reference's own evaluation spent its time
        self.staged = staged  # the solution as the trusted caller checked and built it (`evaluator.trusted.stage`)
        self.solution = solution
        self.config = config
        self.deadline = deadline
        self.device = resolve_device(config.device)
        self.cuda = self.device.type == "cuda"
        self.state = JudgeState()
        self.clock = PhaseClock()
        self._rng = random.Random(config.seed) if config.seed is not None else random.SystemRandom()
        self.processes: dict[str, Any] = {}
        self.batch = 1
        self.max_batch = 1
        self.reference_ms = math.nan
        self.run_shape: dict[str, Any] = {}
        self._variant_sets: dict[str, Any] = {}
        self.zero_mean_plan: precision.ZeroMeanPlan | None = None
        # the graph clock (`measure`): on where the reference, its torch.compile and the candidate all capture
        self.graph_clock = self.cuda and config.profile and config.graph_clock
        self.graph_note = ""
        self.graph_baselines: Any = None
        self.floor_ms = math.nan  # the task's speed-of-light time K0 is chosen for (`_batch_sizes`)
        self.sol_estimate: Any = None  # the reference's speed-of-light estimate behind it, and why there is none
        self.sol_error = ""
        self.adopted = False  # the candidate process is a spare started before this evaluation
        self.baselines_measured = False  # this evaluation measured the task's baselines (none were cached)
        # what is left of `EvalConfig.judge_allowance_s` for the judge's own first measurements (`_judge_measured`),
        # and what they took beyond it (then counted against the candidate's limit)
        self.allowance_left = config.judge_allowance_s
        self.own_work_over_s = 0.0
        self.evaluate_again = False  # it ran out of time after that work: the judge's, not a verdict (`_failed`)
        self.calibration_seconds: dict[str, float] = {}  # the calibration phase by part (diagnostics)

    @property
    def graph_batch(self) -> int:
        """The graph clock's K: K0, fixed from the task's floor before any candidate code loads; the baselines on the
        graph clock are timed at it too."""
        return self.batch

    def seed(self) -> int:
        return self._rng.getrandbits(48)

    def remaining(self) -> float:
        return max(0.05, self.deadline - time.monotonic())

    def _judge_measured(self, started: float) -> None:
        """The time since ``started`` went into the judge's own first measurement of this task (its baselines, the
        reference on the judge's clock; each cached once measured): added to the evaluation's deadline, up to
        `EvalConfig.judge_allowance_s` in all, so the candidate keeps its whole ``timeout_s``. Rationale (H200,
        2026-12-04): torch.compile's baseline of L3/34 took 166 s of a 180 s limit, and an honest candidate had
        the 14 s left; in RL every task's first evaluation pays these, so on a new training set an honest reply could
        be refused (or, as the judge's eval_error, dropped) for the judge's own work."""
        spent = max(0.0, time.monotonic() - started)
        grant = min(self.allowance_left, spent)
        self.allowance_left -= grant
        self.own_work_over_s += spent - grant
        self.deadline += grant

    # -- the evaluation -----------------------------------------------------------------------------------------
    def run(self) -> EvalResult:
        config = self.config
        sandboxed = require_sandbox(config.unsandboxed_trusted_code)
        if not sandboxed:
            self.state.notes.append("UNSANDBOXED: the candidate ran outside the sandbox (trusted-code opt-out)")
        visible = _visible_devices(self.device)
        spare = take_spare(self.cuda, os.environ.get("CUDA_VISIBLE_DEVICES", "")) if sandboxed else None
        self.clock.start("candidate_process")
        self._owned: list[tuple[CandidateProcess, str]] = []  # every candidate process started, and its folder
        if spare is not None and (not self.cuda or visible.get("CUDA_VISIBLE_DEVICES") == spare.visible or
                                  not spare.visible):
            proc = CandidateProcess.adopt(spare)
            self._owned.append((proc, spare.root))
            self.adopted = True
        else:
            proc = self._spawn(sandboxed)
        try:
            return self._run(proc, proc.scratch, sandboxed)
        finally:
            self.clock.stop()
            for owned, root in self._owned:
                owned.close()
                shutil.rmtree(root, ignore_errors=True)

    def _spawn(self, sandboxed: bool) -> CandidateProcess:
        """A new candidate process in a new folder (ended and removed when the evaluation ends)."""
        root = tempfile.mkdtemp(prefix="cuda-agent-eval-")
        os.chmod(root, 0o755)
        scratch = Path(root) / "scratch"
        scratch.mkdir()
        os.chmod(scratch, 0o777)
        proc = CandidateProcess(scratch=scratch, gpu=self.cuda, sandboxed=sandboxed,
                                env=_visible_devices(self.device), tap=self.config.runtime_audit)
        self._owned.append((proc, root))
        proc.spawn()
        return proc

    def _ready(self, session: Session, proc: CandidateProcess, sandboxed: bool) -> CandidateProcess:
        """``proc`` once it has said it is ready; where it is a spare that ended before (no candidate code has run
        in it), a new process with the same files. A process that cannot start is the judge's failure
        (``eval_error``), never the candidate's. Rationale (H200, 2026-12-03): a spare started while another
        evaluation's candidate held nearly all the device's memory died initialising CUDA, and the evaluation that
        adopted it two evaluations later was scored ``out_of_memory``, -1, before its candidate was loaded."""
        try:
            proc.wait_ready(min(self.remaining(), STARTUP_TIMEOUT_S))
            return proc
        except CandidateGone as exc:
            if not self.adopted:
                raise CallFailed("eval_error", f"the candidate's process did not start (no candidate code had run): "
                                               f"{exc.reason}", exc.log) from exc
            self.state.notes.append(f"the spare candidate process had ended before this evaluation ({exc.reason}); "
                                    "a new one was started")
        fresh = self._spawn(sandboxed)
        shutil.copytree(proc.scratch, fresh.scratch, dirs_exist_ok=True, symlinks=True)
        session.proc = fresh
        self.processes["candidate_group"] = fresh.pgid
        self.adopted = False
        return self._ready(session, fresh, sandboxed)

    def _run(self, proc: CandidateProcess, scratch: Path, sandboxed: bool) -> EvalResult:
        config, state, clock = self.config, self.state, self.clock
        clock.start("reference_setup")
        module = reference.load_task_module(self.task.code, f"<task {self.task.id}>")
        init = reference.init_values(module)
        model_seed = self.seed()
        perturb, constant = self._degenerate(module, init, model_seed)
        perturbed_keys: list[list[float]] = []
        ref_model = reference.build_model(module, model_seed, self.device, init, perturb=perturb,
                                          perturbed_keys=perturbed_keys)
        probe_inputs = reference.make_inputs(module, self.seed(), self.device)
        with torch.no_grad():
            probe_out = ref_model(*probe_inputs)
        fp32 = _fp32_task(probe_inputs, probe_out)
        self.zero_mean_plan = precision.plan_zero_mean(ref_model, probe_inputs) if fp32 and config.precision_probe \
            else None
        if self.zero_mean_plan is not None and self.zero_mean_plan.note:
            state.notes.append(self.zero_mean_plan.note)
        per_set = measure.set_bytes(probe_inputs, [v for _, v in compare.flatten(probe_out)])
        del probe_out
        if self.reference_at_batch is not None:  # the outer evaluation's K0 (no speed-of-light estimate again)
            self.batch = self.max_batch = self.reference_at_batch
            self.reference_ms = measure.reference_ms(ref_model, probe_inputs, self.device)
            self.sol_error = "not estimated: the reference timed as a candidate, at the evaluation's K0"
        else:
            self.batch, self.max_batch = self._batch_sizes(ref_model, probe_inputs, per_set)

        clock.start("build")
        if self.staged is not None:
            prepared = restore(self.staged, scratch)
        else:  # the judge in the caller's own process (`evaluate_in_process`, debugging)
            prepared = prepare(self.solution, self.task, config, scratch, sandboxed=sandboxed, gpu=self.cuda)
        state.notes.extend(prepared.notes)
        if config.mode == "strict" and prepared.library is None and prepared.inline_dir is None and \
                not prepared.jit_kernels:
            # Rationale: strict mode's forward may compute only with the solution's own compiled code (its kernels,
            # Triton kernels it defines, or cuBLAS/cuDNN called from its C++); a solution that compiles nothing can
            # only compute with PyTorch, however its operators are hidden from the kernel tap.
            state.fire("torch_compute_in_forward", "strict mode: the solution compiles no code of its own (no "
                                                   "kernels/ sources, no load_inline, no triton.jit kernel), so "
                                                   "forward can only compute with PyTorch")
            return self._verdict_rules(prepared)
        if prepared.library is not None and not self.cuda:
            # CUDA kernels cannot run here; protection and the build were still checked (an agent on a CPU machine
            # acts on those), without running a reference that fails at the first kernel call.
            raise PrepareError("runtime_error", "built, but no CUDA GPU here (torch.cuda.is_available() is false) "
                                                "to run the kernels: evaluate on a GPU host, or submit to a GPU pool "
                                                "(cuda-agent serve)", build_seconds=prepared.build_seconds)
        for hit in scan_source(prepared.source, strict=config.mode == "strict", fp32_task=fp32,
                               single_file=prepared.kind == "single_file"):
            state.notes.append(f"hint ({hit.rule}): model source {hit.detail}")

        baselines = None
        if config.profile and self.reference_at_batch is None:
            clock.start("baselines")
            started = time.monotonic()
            baselines, hit = measure.measure_baselines_for(self.task.code_hash, ref_model, module, config,
                                                           self.device, [self.seed() for _ in range(3)], self.batch)
            self.baselines_measured = not hit
            if not hit:
                self._judge_measured(started)
            if self.graph_clock:
                try:
                    self.graph_baselines = self._graph_baselines(ref_model, module)
                except Exception as exc:  # noqa: BLE001 - the host-launched baselines above still stand
                    self._graph_off(f"the reference is not timed on CUDA-graph replays ({type(exc).__name__}: "
                                    f"{str(exc)[:300]})")

        _release_device_memory()  # what the baselines left reserved in this process, for the candidate and the stash
        clock.start("candidate_process")
        session = Session(proc=proc, config=config, device=self.device, module=module, ref_model=ref_model,
                          fp32=fp32, deadline=self.deadline, state=state, seed=self.seed,
                          constant_output=constant)
        self.processes = {"judge": os.getpid(), "candidate_group": proc.pgid, "sandboxed": sandboxed}
        try:
            proc = self._ready(session, proc, sandboxed)
            self.processes["candidate"] = proc.pid
            clock.start("calibration")
            if self.graph_clock:
                # Rationale: on the graph clock every timed request is a replay at K0; K grows past K0 only for
                # host-launched requests, which then serve just a forward whose capture failed (it is timed at K0).
                # The sets and null requests of every larger K (up to 256 sets, each run through the reference and
                # shared with the candidate) were predicted to be most of the calibration phase's median 1.3 s
                # (H200, 2026-12-04); K 256 cases still took 3.3 s after (`extra["calibration_seconds"]` splits it).
                self.max_batch = self.batch
            parts, lap = self.calibration_seconds, _perf()
            sets = [session.buffers_for(probe_inputs) for _ in range(self.max_batch)]
            lap = add_lap(parts, "sets", lap)
            session.calibrate_precision([probe_inputs, reference.make_inputs(module, self.seed(), self.device)])
            lap = add_lap(parts, "precision", lap)
            if config.profile:
                size = self.batch
                fresh = lambda: reference.make_inputs(module, self.seed(), self.device)  # noqa: E731
                while size <= self.max_batch:  # every K the run may use, before any candidate code loads
                    session.calibrate(sets[:size], fresh, NULL_REQUESTS)
                    lap = add_lap(parts, "null_host", lap)
                    if self.graph_clock and size == self.graph_batch and \
                            not session.calibrate(sets[:size], fresh, NULL_REQUESTS, graph=True):
                        self._graph_off("the null model's requests could not be captured in a CUDA graph")
                    lap = add_lap(parts, "null_graph", lap)
                    size *= 2
            session.reserve_request_memory(sets if config.profile else sets[:self.batch])  # a request's sets
            add_lap(parts, "reserve", lap)
            clock.start("candidate_load")
            before = memory.device_use(self.device)
            self._load(proc, prepared, model_seed, init, {"keys": perturbed_keys} if perturb else False, ref_model)
            try:
                return self._calls(session, proc, prepared, sets, baselines, ref_model, module)
            except torch.OutOfMemoryError as exc:
                blame = memory.candidates_fault(before, memory.device_use(self.device))
                if not blame:
                    raise
                raise CallFailed("out_of_memory", f"{blame} ({str(exc)[:200]})") from exc
        except (CallFailed, CandidateGone) as exc:
            return self._failed(prepared, exc.stage, exc.reason, exc.log)
        finally:
            session.close()

    def _degenerate(self, module: Any, init: list[Any], seed: int) -> tuple[bool, bool]:
        found = degenerate.classify(module, init, seed, self.device, self.config.tolerances, self.seed)
        if found.perturb:
            self.state.notes.append("the task's outputs are (nearly) constant at its module's initialisation; it was "
                                    "verified with perturbed parameters (constant tensors made at construction "
                                    "replaced by values around their constants, the same in ModelNew built under the "
                                    "same seed, however it makes them)")
        if found.constant:
            self.state.notes.append("the task's outputs do not depend on its inputs; the tiny-output check is off")
        return found.perturb, found.constant

    def _load(self, proc: CandidateProcess, prepared: Prepared, seed: int, init: list[Any],
              perturb: dict[str, Any] | bool, ref_model: torch.nn.Module) -> None:
        # The candidate sees only the judge's GPU (CUDA_VISIBLE_DEVICES), as its device 0.
        message = {"op": "load", "device": "cuda:0" if self.cuda else "cpu", "kind": prepared.kind, "module": prepared.module,
                   "library": prepared.library, "inline_dir": prepared.inline_dir, "seed": seed,
                   "init_inputs": [encode(v) for v in init], "perturb_init": perturb,
                   "kernel_tap": bool(self.config.runtime_audit)}
        reply = proc.request(message, timeout=self.remaining())
        if not reply.get("ok"):
            raise CallFailed(str(reply.get("stage", "runtime_error")), str(reply.get("reason", ""))[:3000],
                             str(reply.get("log", ""))[:8000])
        self._compare_parameters(reply.get("parameters"), ref_model)

    def _compare_parameters(self, reported: Any, ref_model: torch.nn.Module) -> None:
        """Notes (never a verdict) on parameters present in both models under one name that differ: the usual cause
        of a mismatch is layers made in another order than the reference's (other weights from the same seed)."""
        if not isinstance(reported, list):
            return
        theirs = {row[0]: row for row in reported if isinstance(row, list) and len(row) == 4}
        differing = []
        with torch.no_grad():
            for name, tensor in list(ref_model.named_parameters()) + list(ref_model.named_buffers()):
                row = theirs.get(name)
                if row is None or list(tensor.shape) != list(row[1]) or not tensor.is_floating_point():
                    continue
                t = tensor.detach().double()
                total = float(t.sum())
                if abs(total - float(row[2])) > 1e-3 * (1 + abs(total)):
                    differing.append(name)
        if differing:
            self.state.notes.append("parameters present in both models under one name differ from the reference's "
                                    f"({', '.join(differing[:6])}): fine if ModelNew folds or packs them on purpose; "
                                    "otherwise create the layers in the reference's order under the same seed")

    # -- the calls ----------------------------------------------------------------------------------------------
    def _batch_sizes(self, ref_model: torch.nn.Module, inputs: list[Any], per_set: int) -> tuple[int, int]:
        """(K0, Kmax): the calls of the first request, so that a candidate at the task's speed-of-light floor
        (`measure.fastest_call_ms`) spends about `measure.TARGET_REQUEST_MS` of device time per request; and the
        most K may grow to once the first request has shown the candidate's own time (`_adapted_batch`): at most
        `measure.BATCH_GROWTH` times K0, within the device's memory (`measure.batch_size`). Both are fixed before
        any candidate code loads. On a CPU both are `CPU_BATCH`: its times are reported, never rewarded, so K need
        not follow the reference's time there, and a K that did would follow the machine's load. A verdict can
        depend on K: `plant_inputs` (it writes into the other buffer sets' inputs) is refused as input_mutation
        where another call of its request is hit, as incorrect at K = 1; CI saw both (2026-12-03)."""
        ref_ms = measure.reference_ms(ref_model, inputs, self.device)
        self.reference_ms = ref_ms
        if not self.cuda:
            return CPU_BATCH, CPU_BATCH
        from cuda_agent.evaluator.speed_of_light import estimate, gpu_spec

        spec = gpu_spec(self.device)
        try:  # kept for the report's floor (`_floors`): it runs the reference once under the counters
            self.sol_estimate = estimate(ref_model, inputs, None, spec)
        except Exception as exc:  # noqa: BLE001 - an op the counters cannot pass through: the reference's time decides
            self.sol_estimate, self.sol_error = None, f"{type(exc).__name__}: {exc}"
        self.floor_ms = measure.fastest_call_ms(ref_model, inputs, spec, ref_ms, estimated=self.sol_estimate)
        first = measure.batch_size(self.floor_ms, per_set, self.device)
        most = min(measure.batch_size(0.0, per_set, self.device), first * measure.BATCH_GROWTH)
        return first, max(first, most)

    def _graph_batch(self, session: Session, sets: list[Any], module: Any) -> bool:
        """The candidate's request captured at K = ``self.graph_batch`` (K0, the baselines' K, fixed from the task's
        floor before any candidate code loaded) and replayed once on trial
        (`Session.trial_replay`); whether the timed requests are replays. Where the capture or the trial fails the
        graph clock goes off, the candidate's graphs are dropped, and the run goes on host-launched. Rationale: K
        taken from anything the candidate does (a slow first replay) would let it choose a small K, and with it the
        per-request latencies that are divided by K."""
        fresh = lambda: reference.make_inputs(module, self.seed(), self.device)  # noqa: E731
        batch = self.graph_batch
        try:
            number, why = session.capture(sets[:batch], fresh)
        except CallFailed as exc:
            number, why = None, f"{exc.stage}: {exc.reason}"
        if number is None:
            self._graph_off(f"the candidate's forward cannot be captured in a CUDA graph ({why})")
            return False
        wrong = session.trial_replay([Call(b, fresh(), f"trial replay {k}") for k, b in enumerate(sets[:batch])])
        if wrong:
            self._graph_off(f"a replay of the captured graph did not reproduce forward ({wrong})")
            session.release()
            return False
        return True

    def _adapted_batch(self, per_call_ms: float) -> int:
        """K for the requests after the warm-up: doubled from K0 while a request of the candidate's calls (their
        time on the judge's clock in the last warm-up request, ``per_call_ms``) stays within
        `measure.TARGET_REQUEST_MS`, up to Kmax. Rationale: a per-request overhead the null span does not cancel is
        divided by K; a candidate that runs slowly in the warm-up only gets a smaller K, never a time it did not
        take."""
        if not (self.cuda and self.config.profile):
            return self.batch
        per_call = max(per_call_ms, measure.MIN_CALL_MS)
        batch = self.batch
        while batch * 2 <= self.max_batch and batch * 2 * per_call <= measure.TARGET_REQUEST_MS:
            batch *= 2
        return batch

    def _request_plan(self, variants: int, batch: int, per_call_ms: float) -> int:
        """The requests after the warm-up, fixed before they start: at least `MIN_CALLS` calls besides the
        ``variants`` (and, when timing, 5 to 30 timed requests within ``timing_budget_s``, the judge's checks
        counted at about the reference's time per call). Rationale: a run whose length depends on what the candidate
        does lets it end the run before a behaviour change is seen; the variants are placed uniformly over a run of
        known length."""
        config = self.config
        least = max(1, math.ceil((max(MIN_CALLS, config.n_trials) + variants) / batch))
        if not config.profile:
            return least
        wanted = min(MAX_TIMED_REQUESTS, max(MIN_TIMED_REQUESTS, math.ceil(config.reps / batch)))
        per_request_s = batch * (max(per_call_ms, 0.0) + CHECK_COST_FACTOR * max(self.reference_ms, 1e-3)) / 1e3
        affordable = int(config.timing_budget_s / per_request_s)
        return max(least, MIN_TIMED_REQUESTS, min(wanted, affordable))

    def _calls(self, session: Session, proc: CandidateProcess, prepared: Prepared, sets: list[Any],
               baselines: Any, ref_model: torch.nn.Module, module: Any) -> EvalResult:
        config, state, clock = self.config, self.state, self.clock
        clock.start("calls")
        session.start_laps()
        variants = self._variant_plan(module) if config.variants else []
        timed_tokens: list[int] = []
        checked_tokens: list[int] = []
        warmup = max(1, config.warmup)
        for r in range(warmup):
            calls = [Call(bufset, reference.make_inputs(module, self.seed(), self.device), f"warm-up call {k}",
                          keep=True) for k, bufset in enumerate(sets[:self.batch])]
            failed = self._run_request(session, calls, f"warm-up request {r}", False, checked_tokens, timed_tokens)
            if failed is not None:
                return self._incorrect(session, failed, prepared, module, sets)
            if state.violations:
                break
        per_call = measure.judge_times(session.history[-1:], session.null_samples, self.cuda).median_ms \
            if session.history else 0.0
        batch = self._adapted_batch(per_call)
        if self.graph_clock and not state.violations and self._graph_batch(session, sets, module):
            batch = self.graph_batch
        requests = self._request_plan(len(variants), batch, per_call) if not state.violations else 0
        slots = requests * batch
        positions = self._rng.sample(range(slots), min(len(variants), slots))
        planned = dict(zip(positions, variants))
        self.run_shape = {"first_batch": self.batch, "batch": batch, "max_batch": self.max_batch,
                          "floor_ms": self.floor_ms,
                          "warmup_requests": warmup, "requests": requests, "calls": slots,
                          "variant_positions": sorted(positions)}
        for r in range(requests):
            calls = []
            for k, bufset in enumerate(sets[:batch]):
                variant = planned.get(r * batch + k)
                call = self._variant(session, variant, bufset) if variant is not None else None
                calls.append(call or Call(bufset, reference.make_inputs(module, self.seed(), self.device),
                                          f"call {r * batch + k}", keep=True))
            graph = session.graph_for(calls) if self.graph_clock else None
            # Rationale: every request is timed but one holding a call of another shape (its work is another size);
            # value variants (scales, zero-mean) change no honest kernel's work. On the graph clock the timed
            # requests are the replays (one that cannot replay, its values besides the tensors changed, is not)
            timed = not any(c.rule == "shape_specialized" for c in calls) and (graph is not None or
                                                                               not self.graph_clock)
            failed = self._run_request(session, calls, f"request {r}", timed, checked_tokens, timed_tokens,
                                       graph=graph)
            if failed is not None:
                return self._incorrect(session, failed, prepared, module, sets)
            if state.violations:
                break
        clock.start("kernel_audit")
        inventory = session.inventory() if config.runtime_audit else None
        proc.close()  # Rationale: nothing of the candidate's may run while the judge times eager PyTorch again
        if inventory is not None:
            copied = set(session.copied_tokens)
            eager = [t for t in [*checked_tokens, *session.capture_tokens]
                     if t in copied and t not in session.replayed_tokens]
            audit = kernels.audit(inventory, eager, prepared.own_kernels, strict=config.mode == "strict",
                                  expect_copies=True, replays=session.graph_requests)
            for rule, detail in audit.rules:
                state.fire(rule, detail)
            state.notes.extend(audit.notes)
            state.check("kernel_tap")
        clock.start("precision_probe")
        session.release_snapshots()  # no request follows: their memory goes to the probe's float64 references
        session.precision_verdict()
        session.precision_probe()
        state.checks[:0] = ["fresh_inputs", "every_call_checked", "canaries", "input_mutation"]
        if state.violations:
            return self._verdict_rules(prepared)
        if not config.profile:
            return self._with_reward(EvalResult(task_id=self.task.id, stage="correct", correct=True,
                                                **self._common(prepared)))
        clock.start("profile")
        return self._timed(session, prepared, sets, baselines, ref_model, module, inventory, timed_tokens)

    def _run_request(self, session: Session, calls: list[Call], label: str, timed: bool, checked: list[int],
                     timed_tokens: list[int], graph: int | None = None) -> str | None:
        """One request and its variants' rules; the reason of an ordinary call that was wrong, else None."""
        outcomes = session.request(calls, label, timed=timed, graph=graph)
        tokens = [c.token for c in calls[:len(outcomes)]]
        checked.extend(tokens)
        if timed:
            timed_tokens.extend(tokens)
        for call, outcome in zip(calls, outcomes):
            if call.rule:
                self.state.check(call.rule)
                if not outcome.ok:
                    self.state.fire(call.rule, f"wrong on {call.label} ({outcome.reason[:300]})")
        last = outcomes[-1]
        if not last.ok and not calls[len(outcomes) - 1].rule:
            return last.reason
        return None

    def _variant_plan(self, module: Any) -> list[tuple[str, Any, str]]:
        plan: list[tuple[str, Any, str]] = []
        for factor in reference.SCALE_FACTORS:
            def make(factor: float = factor) -> list[Any] | None:
                return reference.scaled(reference.make_inputs(module, self.seed(), self.device), factor)
            plan.append((f"inputs scaled by {factor:g}", make, "distribution_specialized"))
        zero_mean = self.zero_mean_plan
        if zero_mean is not None and zero_mean.centred:
            for k in range(ZERO_MEAN_CALLS):
                plan.append((f"zero-mean inputs {k}",
                             lambda: zero_mean.apply(reference.make_inputs(module, self.seed(), self.device)),
                             "distribution_specialized"))
        variant = reference.shape_variant(self.task.code, f"<task {self.task.id}>", module)
        if variant is None:
            self.state.notes.append("shape check skipped: no size constant can change without changing the model")
        else:
            plan.append((f"shape {variant.description}",
                         lambda: reference.make_inputs(variant.module, self.seed(), self.device), "shape_specialized"))
        return plan

    def _variant(self, session: Session, variant: tuple[str, Any, str], slot_set: Any) -> Call | None:
        """The call of a planned variant in one slot of a request (its inputs in that slot's buffers, or in buffers
        of the variant's own shapes), or None where the reference cannot take the variant (then the slot gets an
        ordinary call)."""
        label, make, rule = variant
        try:
            inputs = make()
        except Exception as exc:  # noqa: BLE001 - the reference itself does not take these inputs
            self.state.notes.append(f"{label}: skipped, the task's get_inputs fails there ({exc})"[:300])
            return None
        if inputs is None:
            return None
        with torch.no_grad():
            golden = session.ref_model(*inputs)
        if not all(_finite(v) for _, v in compare.flatten(golden)):
            self.state.notes.append(f"{label}: skipped, the reference is not finite there")
            return None
        del golden
        if slot_set.matches(inputs):
            bufset = slot_set
        else:
            bufset = self._variant_sets.get(label) or session.buffers_for(inputs)
            self._variant_sets[label] = bufset
        return Call(bufset, inputs, label, rule=rule, zero_mean=label.startswith("zero-mean"))

    def _incorrect(self, session: Session, reason: str, prepared: Prepared, module: Any,
                   sets: list[Any]) -> EvalResult:
        """Rationale: results valid only for get_inputs' canonical seed (precomputed or tuned outputs): after a
        mismatch one more request, its first call on the canonical seed, names that case."""
        try:
            inputs = reference.make_inputs(module, reference.CANONICAL_SEED, self.device)
            if sets[0].matches(inputs):
                calls = [Call(sets[0], inputs, "canonical seed")]
                calls += [Call(s, reference.make_inputs(module, self.seed(), self.device), "canonical seed request")
                          for s in sets[1:]]
                outcomes = session.request(calls, "canonical seed")
                if outcomes and outcomes[0].ok:
                    self.state.fire("seed_specialized", "correct for seed 42 but not for fresh seeds")
        except CallFailed:
            pass
        if self.state.violations:
            return self._verdict_rules(prepared)
        return failure(self.task.id, "incorrect", reason, **self._common(prepared))

    # -- verdicts -----------------------------------------------------------------------------------------------
    def _common(self, prepared: Prepared | None) -> dict[str, Any]:
        self.clock.stop()
        state = self.state
        return dict(solution_kind=prepared.kind if prepared else "", device=str(self.device),
                    checks_run=tuple(state.checks), notes=tuple(state.notes),
                    build_seconds=prepared.build_seconds if prepared else None, max_abs_error=state.max_abs,
                    max_rel_error=state.max_rel, input_sets_checked=state.calls_checked,
                    extra={"phase_seconds": dict(self.clock.seconds), "processes": dict(self.processes),
                           "run": dict(self.run_shape),
                           "judge_work_seconds": {k: round(v, 4) for k, v in state.work_seconds.items()},
                           **({"probe_stash": dict(state.stash)} if state.stash else {}),
                           **({"evaluate_again": True} if self.evaluate_again else {}),
                           "calibration_seconds": {k: round(v, 4) for k, v in self.calibration_seconds.items()},
                           **({"precision": dict(state.precision)} if state.precision else {})})

    def _verdict_rules(self, prepared: Prepared | None, **fields: Any) -> EvalResult:
        violations = tuple(self.state.violations)
        return failure(self.task.id, "rule_violation", "; ".join(str(v) for v in violations[:3]),
                       rules_fired=violations, **fields, **self._common(prepared))

    def _failed(self, prepared: Prepared | None, stage: str, reason: str, log_text: str) -> EvalResult:
        if stage == "timeout" and self.own_work_over_s > 0:
            # The judge's own first measurements of the task took more than its allowance (`_judge_measured`), and
            # the rest came out of the candidate's limit: a timeout then is the judge's, not a verdict. Its
            # measurements are cached now, so the next evaluation of the same solution is judged in full.
            seconds = self.clock.seconds.get("baselines", 0.0) + self.clock.seconds.get("reference_clock", 0.0)
            self.evaluate_again = True
            stage, reason = "eval_error", (f"the judge measured this task's baselines ({seconds:.0f} s, "
                                           f"{self.own_work_over_s:.0f} s beyond its "
                                           f"{self.config.judge_allowance_s:.0f} s allowance, taken from the "
                                           f"{self.config.timeout_s:.0f} s limit), and then the time ran out "
                                           f"({reason}); they are cached now: evaluate again")[:2000]
        if self.state.violations:  # rules fired before the candidate went on to fail: the rules are the verdict
            violations = tuple(self.state.violations)
            return failure(self.task.id, "rule_violation", "; ".join(str(v) for v in violations[:3])
                           + f"; then {stage}: {reason}", rules_fired=violations, log=log_text,
                           **self._common(prepared))
        return failure(self.task.id, stage, reason, log=log_text, **self._common(prepared))

    def _with_reward(self, result: EvalResult) -> EvalResult:
        """The reward; on a CPU at most 1 (correct). Rationale: speed is rewarded only on a clock the judge can check
        (a GPU's, cross-checked); on a CPU the candidate's own times are reported, never rewarded."""
        earned = reward(result, self.config.speed_threshold)
        if not self.cuda and earned > REWARD_CORRECT:
            self.state.notes.append("speed is rewarded on a GPU only (a CPU is shared with everything else: its times are reported, not rewarded)")
            return replace(result, reward=REWARD_CORRECT, continuous_reward=float(REWARD_CORRECT),
                           notes=tuple(self.state.notes))
        return replace(result, reward=earned, continuous_reward=continuous(result))

    def _graph_baselines(self, ref_model: torch.nn.Module, module: Any) -> Any:
        """The baselines on the graph clock, at the graph clock's K (``self.graph_batch``): K0, fixed from the task's
        floor before any candidate code loaded (`_batch_sizes`). Raises where the reference cannot be captured, and
        where torch.compile's cannot (a compiled time taken from eager would make "faster than torch.compile" mean
        faster than eager)."""
        started = time.monotonic()
        times, hit = measure.measure_baselines_for(self.task.code_hash, ref_model, module, self.config,
                                                   self.device, [self.seed() for _ in range(3)], self.batch,
                                                   clock="graph")
        self.baselines_measured = self.baselines_measured or not hit
        if not hit:
            self._judge_measured(started)
        if times.compile_error:
            raise timing.GraphCaptureError(f"torch.compile's baseline: {times.compile_error[:300]}")
        return times

    def _reference_on_judge_clock(self, ref_model: torch.nn.Module, module: Any, kind: str) -> None:
        """The reference's own per-call time on the judge's clock ``kind`` ("graph" or "batched": the candidate's),
        and in the judge's process right after it (``self.reference_clock``: the pair, whose ratio scales the
        baselines, `_clock_factor`): the task's ``Model`` submitted as the solution and evaluated as a candidate is
        (its own sandboxed process, the same K, requests, null subtraction and clock); cached beside the baselines.
        Asked only for a candidate that is correct and timed, after its process has ended (as the drift check
        times eager PyTorch again), so a wrong or refused candidate never pays for it. Where it cannot be had, the
        in-process baselines stand and a note says why. Rationale: the baselines are timed in the
        judge's process (graph replays between CUDA events), the candidate across two processes; the reference's
        own code submitted as the solution came out 0-14% slower than its baseline (19 us row sum, 2.7 ms GEMM,
        8 ms LayerNorm; H200, 2026-12-04), so every candidate's speedup was understated by about as much, which
        costs honest kernels reward tiers at the 5% thresholds. A pair whose ratio is outside `CLOCK_FACTOR_LIMITS`
        (0.99-1.16 measured) is taken for a hiccup in one of the two and neither used nor cached: it would scale
        every speedup of the task from then on."""
        from cuda_agent.evaluator.baselines import BaselineTimes

        def measure_now() -> Any:  # "eager": on the judge's clock; "compile": in-process, at the same time
            judged = self._time_reference_as_candidate(kind)
            sets = [reference.make_inputs(module, self.seed(), self.device) for _ in range(self.batch)]
            in_process = measure.time_reference_again(ref_model, sets, self.config, kind,
                                                      requests=measure.PAIR_REQUESTS,
                                                      time_cap_s=measure.PAIR_TIME_CAP_S)
            low, high = CLOCK_FACTOR_LIMITS
            if not low <= judged.median_ms / in_process.median_ms <= high:  # raised: nothing is cached
                raise RuntimeError(f"{judged.median_ms:.4g} ms on the judge's clock against {in_process.median_ms:.4g}"
                                   f" ms in the judge's process, a ratio outside [{low}, {high}]: not used")
            return BaselineTimes(eager=judged, compile=in_process, key="")

        started, hit = time.monotonic(), False
        try:
            times, hit = measure.reference_clock_for(self.task.code_hash, self.config, self.device, self.batch, kind,
                                                     measure_now)
        except Exception as exc:  # noqa: BLE001 - the in-process baselines still stand
            self.state.notes.append(f"the reference could not be timed on the judge's clock, so the baselines' own "
                                    f"times are used: {type(exc).__name__}: {exc}"[:500])
            return
        finally:
            if not hit:  # measured, or tried and failed: the judge's own work either way
                self._judge_measured(started)
        self.baselines_measured = self.baselines_measured or not hit
        self.reference_clock = (times.eager, times.compile)

    def _time_reference_as_candidate(self, kind: str) -> Any:
        """The reference evaluated as a candidate (relaxed mode: its forward is PyTorch; no variants, no precision
        probe: only its time is wanted), at this evaluation's K; its per-call `TimingStats` on the judge's clock.
        Raises RuntimeError where that evaluation did not end timed on ``kind``."""
        # the evaluation's own end must still come in time, the judge's allowance for its own work included
        deadline = self.deadline + self.allowance_left - REFERENCE_CLOCK_MARGIN_S
        if deadline - time.monotonic() < REFERENCE_CLOCK_MIN_S:
            raise RuntimeError(f"{max(0.0, deadline + REFERENCE_CLOCK_MARGIN_S - time.monotonic()):.0f} s of the "
                               "evaluation were left (the judge's allowance included), too "
                               "few to evaluate the reference as well (it is measured at the next evaluation)")
        # what this evaluation left reserved in the judge's allocator, given back for the reference's own process
        # (its outputs and graph pool: 6.4 GB a call on L1/19), as before a candidate's
        _release_device_memory()
        folder = Path(tempfile.mkdtemp(prefix="cuda-agent-refclock-"))
        try:
            solution = folder / "model_new.py"
            solution.write_text(f"{self.task.code}\n\n\nclass ModelNew(Model):  # the reference, timed as a candidate"
                                f"\n    pass\n")
            # reps: at least PAIR_REQUESTS timed requests at this K, more where a candidate gets more (small K); the
            # budget in timing_budget_s still bounds them
            reps = max(self.config.reps, measure.PAIR_REQUESTS * self.batch)
            config = replace(self.config, mode="relaxed", variants=False, precision_probe=False,
                             kernel_breakdown=False, baseline_drift_limit=0.0, reps=reps, judge_allowance_s=0.0)
            nested = Evaluation(self.task, solution, config, deadline, reference_at_batch=self.batch)
            result = nested.run()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        clock_name = (result.extra.get("judge_clock") or {}).get("clock")
        want = "graph_replay" if kind == "graph" else "host_launched"
        self.reference_clock_phases = {k: round(v, 3) for k, v in (result.extra.get("phase_seconds") or {}).items()}
        if result.stage != "timed" or result.candidate is None or clock_name != want:
            raise RuntimeError(f"the reference as a candidate ended {result.stage} on clock {clock_name} "
                               f"(wanted {want}): {result.reason[:300]}")
        return result.candidate

    def _graph_off(self, why: str) -> None:
        """Every time of this evaluation on host-launched requests instead of graph replays, and why."""
        if self.graph_clock:
            self.graph_clock = False
            self.graph_note = why[:600]
            self.state.notes.append(f"timed with host-launched requests, not CUDA-graph replays: {why}"[:700])

    def _timed(self, session: Session, prepared: Prepared, sets: list[Any], baselines: Any,
               ref_model: torch.nn.Module, module: Any, inventory: Any, timed_tokens: list[int]) -> EvalResult:
        config, state = self.config, self.state
        clock_name = "graph" if self.graph_clock and session.samples and all(s.graph for s in session.samples) \
            else "batched"
        if clock_name == "graph":
            baselines = self.graph_baselines
        stats = measure.judge_times(session.samples or session.history[-1:], session.null_samples, self.cuda)
        # the null requests whose span is subtracted from the timed ones (same calls, launched the same way)
        null_timed = measure.null_of_kind(session.null_samples, measure.timed_kind(session.samples))
        fields: dict[str, Any] = {"candidate": stats}
        extra = {"judge_clock": {"clock": "graph_replay" if clock_name == "graph" else "host_launched",
                                 "graph_note": self.graph_note,
                                 "batch": self.run_shape.get("batch"), "timed_requests": len(session.samples),
                                 "null_requests": len(session.null_samples),
                                 "null_request_ms": measure.median([s.wall_ms for s in null_timed])
                                 if null_timed else None,
                                 "request_spans_ms": [round(s.wall_ms, 4) for s in session.samples][:64],
                                 "null_spans_ms": [round(s.wall_ms, 4) for s in null_timed][:64],
                                 "reported_per_call_ms": measure.reported_per_call_ms(session.samples),
                                 "request_ms": measure.median([s.wall_ms for s in session.samples]),
                                 "reported_host_request_ms": measure.median([s.reported_host_ms
                                                                             for s in session.samples]),
                                 "reported_host_null_ms": measure.median([s.reported_host_ms
                                                                          for s in session.null_samples])
                                 if session.null_samples else None,
                                 "reported_time_used": 0,
                                 **measure.clock_resolution(session.samples, session.null_samples),
                                 "breakdown_ms": {"timed": measure.breakdown(session.samples),
                                                  "null": measure.breakdown(null_timed)}}}
        if self.cuda:
            state.check("judge_clock")
        # eager PyTorch timed again on K0 of the candidate's buffer sets: the K its cached time was measured at (both
        # clocks), not every set the run allocated (up to 16 K0), so the drift compares like with like
        timing_sets = [[s.view if s is not None else x for s, x in zip(b.inputs, b.scalars)]
                       for b in sets[:self.batch]]
        if baselines is not None:
            baselines, drift, paired = self._drift(baselines, ref_model, module, timing_sets, clock_name)
            if self.cuda and config.reference_on_judge_clock and not state.violations:
                self.clock.start("reference_clock")
                self._reference_on_judge_clock(ref_model, module, clock_name)
                session.deadline = self.deadline  # moved on by the judge's own measurement, if it made one
                self.clock.start("profile")
            factor = self._clock_factor(extra["judge_clock"])
            if factor != 1.0:  # every baseline reported on the judge's clock (the in-process times: extra)
                baselines = replace(baselines, eager=baselines.eager.scaled(factor),
                                    compile=baselines.compile.scaled(factor))
                paired = paired.scaled(factor) if paired is not None else None
            fields.update(eager=baselines.eager, compile=baselines.compile, eager_paired=paired,
                          baseline_drift=drift)
            s_e, lo_e, hi_e = speedup_with_spread(baselines.eager.scaled(drift), stats)
            s_c, lo_c, hi_c = speedup_with_spread(baselines.compile.scaled(drift), stats)
            fields.update(speedup_eager=s_e, speedup_eager_low=lo_e, speedup_eager_high=hi_e, speedup_compile=s_c,
                          speedup_compile_low=lo_c, speedup_compile_high=hi_c)
            if baselines.compile_error:
                state.notes.append(f"torch.compile baseline fell back to eager: {baselines.compile_error[:200]}")
            if config.kernel_breakdown:
                fields["compile_kernel_breakdown"] = baselines.compile_kernels
        if self.cuda:
            batch = session.samples[0].calls if session.samples else 1
            resolution = measure.resolution_ms(measure.null_spans(session.null_samples, batch, clock_name == "graph"),
                                               batch)
            self._floors(sets[0], stats, fields, resolution)
        if config.kernel_breakdown and inventory is not None:
            fields["kernel_breakdown"] = kernels.breakdown(inventory, timed_tokens, session.graph_requests)
        common = self._common(prepared)
        common["extra"].update(extra)
        if state.violations:
            violations = tuple(state.violations)
            common["notes"] = tuple(state.notes)
            return failure(self.task.id, "rule_violation", "; ".join(str(v) for v in violations[:3]),
                           rules_fired=violations, **fields, **common)
        common["notes"] = tuple(state.notes)
        return self._with_reward(EvalResult(task_id=self.task.id, stage="timed", correct=True, **fields, **common))

    def _clock_factor(self, report: dict[str, Any]) -> float:
        """How much slower the reference ran on the judge's clock than in the judge's process, both measured at
        the same time (`_reference_on_judge_clock`): the factor both baselines are scaled by, so that the candidate
        and eager PyTorch are timed alike (eager exactly; torch.compile's kernels are not run on the judge's clock,
        its in-process time is scaled by the same factor). The low end of the two medians' confidence intervals
        (judge's low over in-process high), not the ratio of medians: the pair is measured once and cached, so its
        noise would otherwise stay in every speedup of the task, and one measured a few percent high would lift the
        reference's own code, submitted as the solution, toward the 5% threshold of reward 2. 1.0 where there is no
        such pair (it is measured on the candidate's own clock); what was used goes into ``report``."""
        judged, in_process = self.reference_clock or (None, None)
        if judged is None or not (judged.median_ms > 0 and in_process.median_ms > 0):
            report["clock_factor"] = 1.0
            return 1.0
        point = judged.median_ms / in_process.median_ms
        low, high = judged.ci_low_ms or judged.median_ms, in_process.ci_high_ms or in_process.median_ms
        factor = min(point, low / high) if low > 0 and high > 0 else point
        report.update(clock_factor=factor, clock_factor_point=point, reference_judge_ms=judged.median_ms,
                      reference_in_process_ms=in_process.median_ms,
                      **({"reference_clock_phases": self.reference_clock_phases} if self.reference_clock_phases else {}))
        return factor

    def _drift(self, baselines: Any, ref_model: torch.nn.Module, module: Any,
               sets: list[list[Any]], clock: str = "batched") -> tuple[Any, float, Any]:
        """Rationale: cached baselines carry the conditions of the evaluation that measured them. Eager PyTorch is
        timed again now, on the candidate's own buffers, with the candidate's process gone; within
        ``baseline_drift_limit`` the cached times are scaled by the drift, beyond it they are measured again (and
        the cache refreshed), never scaled by a capped factor."""
        limit = self.config.baseline_drift_limit
        if limit <= 0:
            return baselines, 1.0, None
        try:
            paired = measure.time_reference_again(ref_model, sets, self.config, clock)
        except Exception as exc:  # noqa: BLE001 - the cached baselines still stand
            self.state.notes.append(f"eager PyTorch could not be timed again: {type(exc).__name__}: {exc}"[:300])
            return baselines, 1.0, None
        drift = measure.drift_factor(paired.median_ms, baselines.eager.median_ms)
        if abs(drift - 1.0) <= limit:
            return baselines, drift, paired
        self.state.notes.append(f"eager PyTorch ran {drift:.3f}x its cached time; the baselines were measured "
                                "again (beyond baseline_drift_limit)")
        fresh, _ = measure.measure_baselines_for(self.task.code_hash, ref_model, module, self.config, self.device,
                                                 [self.seed() for _ in range(3)], self.batch, refresh=True,
                                                 clock=clock)
        return fresh, 1.0, paired

    def _floors(self, bufset: Any, stats: Any, fields: dict[str, Any], resolution: float) -> None:
        """The output-write floor decides (rule ``below_speed_of_light``) where the time is below it by more than
        the clock's ``resolution``; the reference's FLOP and byte floor is reported as a fraction only (an algebraic
        shortcut may legitimately beat it)."""
        outputs = [s.view for s in bufset.outputs]
        floor = measure.output_floor_ms(outputs, self.device)
        self.state.check("speed_of_light")
        if floor > 0 and stats.median_ms + resolution < floor * self.config.sol_tolerance:
            self.state.fire("below_speed_of_light", f"timed {stats.median_ms:.4f} ms; writing the outputs alone "
                                                    f"takes at least {floor:.4f} ms on this GPU")
        est = self.sol_estimate  # made before any candidate code loaded (`_batch_sizes`), on inputs of these shapes
        if est is None:
            self.state.notes.append(f"speed-of-light estimate unavailable: {self.sol_error}"[:300])
        elif est.floor_ms > 0:
            fields.update(sol_floor_ms=float(est.floor_ms), sol_fraction=float(est.floor_ms) / stats.median_ms,
                          sol_bound=str(est.bound))


def _visible_devices(device: torch.device) -> dict[str, str]:
    """The candidate sees the judge's device as its device 0."""
    if device.type != "cuda":
        return {}
    index = device.index if device.index is not None else torch.cuda.current_device()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        ids = [v for v in visible.split(",") if v.strip()]
        if index < len(ids):
            return {"CUDA_VISIBLE_DEVICES": ids[index]}
    return {"CUDA_VISIBLE_DEVICES": str(index)}


def _fp32_task(inputs: list[Any], outputs: Any) -> bool:
    floats = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype.is_floating_point]
    floats += [v.dtype for _, v in compare.flatten(outputs) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point]
    return bool(floats) and all(d in (torch.float32, torch.float64) for d in floats)


def _finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return bool(torch.isfinite(value).all().item())
    return True
