"""One evaluation, in the judge's process: reference, candidate process, calls, checks, timing, verdict.

The judge runs no candidate code. The order: the candidate's process starts (it imports torch meanwhile, and nothing
of the candidate's yet); the judge loads the task from ``task.code`` (never the workspace's model.py), decides
whether the task needs perturbed parameters (its outputs are constant at initialisation), builds the candidate in
the sandbox, measures the baselines if they are not cached (no candidate code loaded yet anywhere), then has the
candidate load and runs the calls (`session`). When the calls are done the candidate's process is ended before
eager PyTorch is timed again for the drift correction, so nothing of the candidate's can run on the device then.
"""
from __future__ import annotations

import logging
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
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.judge import compare, degenerate, kernels, measure, reference
from cuda_agent.evaluator.judge.candidate import CandidateGone, CandidateProcess, take_spare
from cuda_agent.evaluator.judge.prepare import PrepareError, Prepared, prepare, restore, solution_kind
from cuda_agent.evaluator.judge.session import CallFailed, JudgeState, Session
from cuda_agent.evaluator.judge.static_hints import scan_source
from cuda_agent.evaluator.judge.values import encode
from cuda_agent.evaluator.result import EvalResult, continuous, failure, reward
from cuda_agent.evaluator.reward_schedule import speedup_with_spread
from cuda_agent.evaluator.stats import rel_ci
from cuda_agent.sandbox.process import require_sandbox
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)
_perf = time.perf_counter
STARTUP_TIMEOUT_S = 120.0
MAX_CALLS = 1000


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
    return result.trimmed(config.max_log_chars).to_dict()


class Evaluation:
    def __init__(self, task: Task, solution: Path, config: EvalConfig, deadline: float, *,
                 staged: dict[str, Any] | None = None) -> None:
        self.task = task
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

    def seed(self) -> int:
        return self._rng.getrandbits(48)

    def remaining(self) -> float:
        return max(0.05, self.deadline - time.monotonic())

    # -- the evaluation -----------------------------------------------------------------------------------------
    def run(self) -> EvalResult:
        config = self.config
        sandboxed = require_sandbox(config.unsandboxed_trusted_code)
        if not sandboxed:
            self.state.notes.append("UNSANDBOXED: the candidate ran outside the sandbox (trusted-code opt-out)")
        visible = _visible_devices(self.device)
        spare = take_spare(self.cuda, os.environ.get("CUDA_VISIBLE_DEVICES", "")) if sandboxed else None
        self.clock.start("candidate_process")
        if spare is not None and (not self.cuda or visible.get("CUDA_VISIBLE_DEVICES") == spare.visible or
                                  not spare.visible):
            proc = CandidateProcess.adopt(spare)
            root = spare.root
        else:
            root = tempfile.mkdtemp(prefix="cuda-agent-eval-")
            os.chmod(root, 0o755)
            scratch = Path(root) / "scratch"
            scratch.mkdir()
            os.chmod(scratch, 0o777)
            proc = CandidateProcess(scratch=scratch, gpu=self.cuda, sandboxed=sandboxed, env=visible,
                                    tap=self.config.runtime_audit)
            proc.spawn()
        try:
            return self._run(proc, proc.scratch, sandboxed)
        finally:
            self.clock.stop()
            proc.close()
            shutil.rmtree(root, ignore_errors=True)

    def _run(self, proc: CandidateProcess, scratch: Path, sandboxed: bool) -> EvalResult:
        config, state, clock = self.config, self.state, self.clock
        clock.start("reference_setup")
        module = reference.load_task_module(self.task.code, f"<task {self.task.id}>")
        init = reference.init_values(module)
        model_seed = self.seed()
        perturb, constant = self._degenerate(module, init, model_seed)
        ref_model = reference.build_model(module, model_seed, self.device, init, perturb=perturb)
        probe_inputs = reference.make_inputs(module, self.seed(), self.device)
        with torch.no_grad():
            probe_out = ref_model(*probe_inputs)
        fp32 = _fp32_task(probe_inputs, probe_out)
        del probe_out

        clock.start("build")
        if self.staged is not None:
            prepared = restore(self.staged, scratch)
        else:  # the judge in the caller's own process (`evaluate_in_process`, debugging)
            prepared = prepare(self.solution, self.task, config, scratch, sandboxed=sandboxed, gpu=self.cuda)
        state.notes.extend(prepared.notes)
        if config.mode == "strict" and prepared.library is None and prepared.inline_dir is None:
            # Rationale: strict mode's forward may compute only with the solution's own compiled code (its kernels, or
            # cuBLAS/cuDNN called from its C++); a solution that compiles nothing can only compute with PyTorch,
            # however its operators are hidden from the kernel tap.
            state.fire("torch_compute_in_forward", "strict mode: the solution compiles no code of its own (no "
                                                   "kernels/ sources, no load_inline), so forward can only compute "
                                                   "with PyTorch")
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
        if config.profile:
            clock.start("baselines")
            baselines, _hit = measure.measure_baselines_for(self.task.code_hash, ref_model, module, config,
                                                            self.device, [self.seed() for _ in range(3)])

        clock.start("candidate_process")
        session = Session(proc=proc, config=config, device=self.device, module=module, ref_model=ref_model,
                          fp32=fp32, deadline=self.deadline, state=state, seed=self.seed,
                          constant_output=constant)
        self.processes = {"judge": os.getpid(), "candidate_group": proc.pgid, "sandboxed": sandboxed}
        try:
            proc.wait_ready(min(self.remaining(), STARTUP_TIMEOUT_S))
            self.processes["candidate"] = proc.pid
            clock.start("calibration")
            sets = [session.buffers_for(probe_inputs) for _ in range(measure.timing_set_count(probe_inputs,
                                                                                                self.device))]
            if config.profile:
                session.calibrate(sets[0], lambda: reference.make_inputs(module, self.seed(), self.device))
            clock.start("candidate_load")
            self._load(proc, prepared, model_seed, init, perturb, ref_model)
            return self._calls(session, proc, prepared, sets, baselines, ref_model, module)
        except (CallFailed, CandidateGone) as exc:
            return self._failed(prepared, exc.stage, exc.reason, exc.log)
        finally:
            session.close()

    def _degenerate(self, module: Any, init: list[Any], seed: int) -> tuple[bool, bool]:
        found = degenerate.classify(module, init, seed, self.device, self.config.tolerances, self.seed)
        if found.perturb:
            self.state.notes.append("the task's outputs are (nearly) constant at its module's initialisation; it was "
                                    "verified with perturbed parameters (constant initialisations drawn around "
                                    "their constants, the same in ModelNew built under the same seed)")
        if found.constant:
            self.state.notes.append("the task's outputs do not depend on its inputs; the tiny-output check is off")
        return found.perturb, found.constant

    def _load(self, proc: CandidateProcess, prepared: Prepared, seed: int, init: list[Any], perturb: bool,
              ref_model: torch.nn.Module) -> None:
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
    def _calls(self, session: Session, proc: CandidateProcess, prepared: Prepared, sets: list[Any],
               baselines: Any, ref_model: torch.nn.Module, module: Any) -> EvalResult:
        config, state, clock = self.config, self.state, self.clock
        clock.start("calls")
        n_sets = len(sets)
        variants = self._variant_plan(module) if config.variants else []
        positions = sorted(self._rng.sample(range(1, config.n_trials + len(variants) + 1), len(variants)))
        planned = dict(zip(positions, variants))
        main_calls = 0
        timed_tokens: list[int] = []
        checked_tokens: list[int] = []
        loop_start = _perf()
        for i in range(MAX_CALLS):
            if i in planned:
                label, make, rule = planned[i]
                outcome = self._variant_call(session, label, make, rule)
                checked_tokens.append(session.token)
                if outcome is not None and not outcome.ok:
                    break
                continue
            bufset = sets[main_calls % n_sets]
            inputs = reference.make_inputs(module, self.seed(), self.device)
            timed = main_calls >= config.warmup
            outcome = session.call(bufset, inputs, f"call {main_calls}", timed=timed,
                                   stash=not session.stash or self._rng.random() < 0.3)
            checked_tokens.append(session.token)
            main_calls += 1
            if timed:
                timed_tokens.append(session.token)
            if not outcome.ok:
                return self._incorrect(session, outcome.reason, prepared, module)
            if state.violations:
                break
            if i >= max(positions, default=0) and main_calls >= config.n_trials and \
                    self._converged(session, loop_start):
                break
        clock.start("kernel_audit")
        inventory = session.inventory() if config.runtime_audit else None
        proc.close()  # Rationale: nothing of the candidate's may run while the judge times eager PyTorch again
        if inventory is not None:
            copied = set(session.copied_tokens)
            audit = kernels.audit(inventory, [t for t in checked_tokens if t in copied], prepared.own_kernels,
                                  strict=config.mode == "strict", expect_copies=True)
            for rule, detail in audit.rules:
                state.fire(rule, detail)
            state.notes.extend(audit.notes)
            state.check("kernel_tap")
        clock.start("precision_probe")
        session.precision_probe()
        state.checks[:0] = ["fresh_inputs", "every_call_checked", "canaries", "input_mutation"]
        if state.violations:
            return self._verdict_rules(prepared)
        if not config.profile:
            return self._with_reward(EvalResult(task_id=self.task.id, stage="correct", correct=True,
                                                **self._common(prepared)))
        clock.start("profile")
        return self._timed(session, prepared, sets, baselines, ref_model, module, inventory, timed_tokens)

    def _converged(self, session: Session, loop_start: float) -> bool:
        samples = session.samples
        if len(samples) < 3:
            return False
        if _perf() - loop_start > self.config.timing_budget_s:
            return True
        if len(samples) >= self.config.reps:
            return True
        return len(samples) >= 10 and rel_ci([s.event_ms for s in samples]) <= 0.005 and len(samples) % 5 == 0

    def _variant_plan(self, module: Any) -> list[tuple[str, Any, str]]:
        plan: list[tuple[str, Any, str]] = []
        for factor in reference.SCALE_FACTORS:
            def make(factor: float = factor) -> list[Any] | None:
                return reference.scaled(reference.make_inputs(module, self.seed(), self.device), factor)
            plan.append((f"inputs scaled by {factor:g}", make, "distribution_specialized"))
        variant = reference.shape_variant(self.task.code, f"<task {self.task.id}>", module)
        if variant is None:
            self.state.notes.append("shape check skipped: no size constant can change without changing the model")
        else:
            plan.append((f"shape {variant.description}",
                         lambda: reference.make_inputs(variant.module, self.seed(), self.device), "shape_specialized"))
        return plan

    def _variant_call(self, session: Session, label: str, make: Any, rule: str) -> Any:
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
        bufset = next((s for s in session.sets if s.matches(inputs)), None) or session.buffers_for(inputs)
        outcome = session.call(bufset, inputs, label)
        self.state.check(rule)
        if not outcome.ok:
            self.state.fire(rule, f"wrong on {label} ({outcome.reason[:300]})")
        return outcome

    def _incorrect(self, session: Session, reason: str, prepared: Prepared, module: Any) -> EvalResult:
        """Rationale: results valid only for get_inputs' canonical seed (precomputed or tuned outputs): after a
        mismatch one more call on the canonical seed names that case."""
        try:
            inputs = reference.make_inputs(module, reference.CANONICAL_SEED, self.device)
            bufset = next(s for s in session.sets if s.matches(inputs))
            if session.call(bufset, inputs, "canonical seed").ok:
                self.state.fire("seed_specialized", "correct for seed 42 but not for fresh seeds")
        except (CallFailed, StopIteration):
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
                    extra={"phase_seconds": dict(self.clock.seconds), "processes": dict(self.processes)})

    def _verdict_rules(self, prepared: Prepared | None, **fields: Any) -> EvalResult:
        violations = tuple(self.state.violations)
        return failure(self.task.id, "rule_violation", "; ".join(str(v) for v in violations[:3]),
                       rules_fired=violations, **fields, **self._common(prepared))

    def _failed(self, prepared: Prepared | None, stage: str, reason: str, log_text: str) -> EvalResult:
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
        if not self.cuda and earned > 1:
            self.state.notes.append("speed is rewarded on a GPU only (the times here are the candidate's word)")
            return replace(result, reward=1, continuous_reward=1.0, notes=tuple(self.state.notes))
        return replace(result, reward=earned, continuous_reward=continuous(result))

    def _timed(self, session: Session, prepared: Prepared, sets: list[Any], baselines: Any,
               ref_model: torch.nn.Module, module: Any, inventory: Any, timed_tokens: list[int]) -> EvalResult:
        config, state = self.config, self.state
        stats = measure.candidate_stats(session.samples, session.null_samples, self.cuda)
        fields: dict[str, Any] = {"candidate": stats}
        check = measure.cross_check(stats, session.samples, session.null_samples, config.timing_tolerance)
        extra = {"timing_cross_check": check.to_dict()}
        if self.cuda:
            state.check("timing_cross_check")
        if not check.ok and self.cuda:  # on a CPU the cores are shared with everything: numbers only
            state.fire("timing_mismatch", f"the judge's clock gives at least {check.bound_ms:.4f} ms per call; the "
                                          f"candidate's process reported {check.reported_ms:.4f} ms")
        timing_sets = [[s.view if s is not None else x for s, x in zip(b.inputs, b.scalars)] for b in sets]
        if baselines is not None:
            baselines, drift, paired = self._drift(baselines, ref_model, module, timing_sets)
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
            self._floors(sets[0], stats, ref_model, fields)
        if config.kernel_breakdown and inventory is not None:
            fields["kernel_breakdown"] = kernels.breakdown(inventory, timed_tokens)
        common = self._common(prepared)
        common["extra"].update(extra)
        if state.violations:
            violations = tuple(state.violations)
            common["notes"] = tuple(state.notes)
            return failure(self.task.id, "rule_violation", "; ".join(str(v) for v in violations[:3]),
                           rules_fired=violations, **fields, **common)
        common["notes"] = tuple(state.notes)
        return self._with_reward(EvalResult(task_id=self.task.id, stage="timed", correct=True, **fields, **common))

    def _drift(self, baselines: Any, ref_model: torch.nn.Module, module: Any,
               sets: list[list[Any]]) -> tuple[Any, float, Any]:
        """Rationale: cached baselines carry the conditions of the evaluation that measured them. Eager PyTorch is
        timed again now, on the candidate's own buffers, with the candidate's process gone; within
        ``baseline_drift_limit`` the cached times are scaled by the drift, beyond it they are measured again (and
        the cache refreshed), never scaled by a capped factor."""
        limit = self.config.baseline_drift_limit
        if limit <= 0:
            return baselines, 1.0, None
        try:
            paired = measure.time_reference_again(ref_model, sets, self.config)
        except Exception as exc:  # noqa: BLE001 - the cached baselines still stand
            self.state.notes.append(f"eager PyTorch could not be timed again: {type(exc).__name__}: {exc}"[:300])
            return baselines, 1.0, None
        drift = measure.drift_factor(paired.median_ms, baselines.eager.median_ms)
        if abs(drift - 1.0) <= limit:
            return baselines, drift, paired
        self.state.notes.append(f"eager PyTorch ran {drift:.3f}x its cached time; the baselines were measured "
                                "again (beyond baseline_drift_limit)")
        fresh, _ = measure.measure_baselines_for(self.task.code_hash, ref_model, module, self.config, self.device,
                                                 [self.seed() for _ in range(3)], refresh=True)
        return fresh, 1.0, paired

    def _floors(self, bufset: Any, stats: Any, ref_model: torch.nn.Module, fields: dict[str, Any]) -> None:
        """The output-write floor decides (rule ``below_speed_of_light``); the reference's FLOP and byte floor is
        reported as a fraction only (an algebraic shortcut may legitimately beat it)."""
        outputs = [s.view for s in bufset.outputs]
        floor = measure.output_floor_ms(outputs, self.device)
        self.state.check("speed_of_light")
        if floor > 0 and stats.median_ms < floor * self.config.sol_tolerance:
            self.state.fire("below_speed_of_light", f"timed {stats.median_ms:.4f} ms; writing the outputs alone "
                                                    f"takes at least {floor:.4f} ms on this GPU")
        try:
            from cuda_agent.evaluator.speed_of_light import estimate, gpu_spec

            inputs = [s.view if s is not None else x for s, x in zip(bufset.inputs, bufset.scalars)]
            est = estimate(ref_model, inputs, outputs[0] if len(outputs) == 1 else tuple(outputs),
                           gpu_spec(self.device))
            if est.floor_ms > 0:
                fields.update(sol_floor_ms=float(est.floor_ms), sol_fraction=float(est.floor_ms) / stats.median_ms,
                              sol_bound=str(est.bound))
        except Exception as exc:  # noqa: BLE001 - an informational estimate only
            self.state.notes.append(f"speed-of-light estimate unavailable: {type(exc).__name__}: {exc}"[:300])


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
