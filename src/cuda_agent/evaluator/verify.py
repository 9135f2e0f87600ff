"""The verification loop: every candidate call runs on fresh, canary-padded inputs under the dispatcher guard and
is followed by the checks below; then the probes (cached addresses, an unaudited call, other seeds, scales and
shapes, a float64 precision probe, the run-time kernel audit) and, when correct, the timing.

Each check names the rule it fires and carries a ``Rationale:`` comment naming the cheat it stops.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
import traceback
import types
from typing import Any

import torch

from cuda_agent.evaluator import compare, reference
from cuda_agent.evaluator import timing as timing_mod
from cuda_agent.evaluator.candidate import Candidate
from cuda_agent.evaluator.checks import runtime_audit
from cuda_agent.evaluator.checks.audit import audit
from cuda_agent.evaluator.checks.guard import DispatchGuard, PaddedBuffer, count_poison, padded_like
from cuda_agent.evaluator.checks.integrity import Snapshot
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.result import EvalResult, continuous, failure, reward
from cuda_agent.evaluator.rules import RuleViolation
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)
_perf = time.perf_counter
_no_grad = torch.no_grad
_Tensor = torch.Tensor
_type = type
_data_of = torch.Tensor.data.__get__

TRIVIAL_SIGNAL_LIMIT = 0.05      # error above 5% of the output's own variation, while passing only by tolerance
PRECISION_RATIO = 64.0           # candidate error vs float64 this many times the fp32 reference's error ...
PRECISION_FLOOR = 1e-4           # ... and above this relative error: not an fp32 computation
_ALLOWED_KEYS = frozenset({"CPU", "CUDA", "ADInplaceOrView", "AutogradCPU", "AutogradCUDA", "AutocastCPU",
                           "AutocastCUDA", "AutogradOther", "Dense", "AutocastMTIA", "AutocastXPU", "AutocastMPS",
                           "AutocastHPU", "AutocastXLA", "AutocastPrivateUse1", "AutogradFunctionality"})


class PhaseClock:
    """Wall seconds per evaluation phase (``extra["phase_seconds"]`` of the result): where an evaluation's time
    goes. Phases end at a device synchronisation or a value read, so device work lands in the phase that queued it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Any:
        start = _perf()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + _perf() - start


class CandidateError(Exception):
    """The candidate raised, crashed the device, or ran out of memory; ``stage`` says which."""

    def __init__(self, stage: str, reason: str, log: str = "", violations: list[RuleViolation] | None = None) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.log = log
        self.violations = violations or []


def _release_cached_memory(cuda: bool) -> None:
    """Large tasks (KernelBench has 6 GB inputs) need each phase's tensors gone before the next phase allocates."""
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


class Verifier:
    """Runs the checks for one candidate. ``run`` returns the final EvalResult."""

    def __init__(self, *, task: Task, config: EvalConfig, device: torch.device, module: types.ModuleType,
                 ref_model: torch.nn.Module, cand: Candidate, snapshot: Snapshot, seeds: list[int], fp32_task: bool,
                 model_seed: int, baselines: Any = None, clock: PhaseClock | None = None) -> None:
        self.task = task
        self.config = config
        self.device = device
        self.cuda = device.type == "cuda"
        self.module = module
        self.ref_model = ref_model
        self.cand = cand
        self.snapshot = snapshot
        self.seeds = seeds
        self.fp32 = fp32_task
        self.model_seed = model_seed
        self.baselines = baselines
        self.violations: list[RuleViolation] = []
        self.notes: list[str] = list(cand.notes)
        self.checks: list[str] = ["static"]
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.sets_checked = 0
        self.model: torch.nn.Module | None = None
        self.clock = clock or PhaseClock()

    # ----------------------------------------------------------------------------------------------- plumbing
    def fire(self, rule: str, detail: str) -> None:
        if len(self.violations) < 40 and not any(v.rule == rule and v.detail == detail for v in self.violations):
            self.violations.append(RuleViolation(rule, detail))

    def _tol(self, dtype_name: str) -> tuple[float, float]:
        return self.config.tolerances(dtype_name)

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _fail(self, exc: BaseException, where: str) -> CandidateError:
        for rule, detail in audit().log.hits:  # Rationale: a refused operation is often why the candidate failed.
            self.fire(rule, detail)
        text = "".join(traceback.format_exception(exc))
        if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower():
            return CandidateError("out_of_memory", f"{where}: out of memory: {str(exc)[:300]}", text, self.violations)
        return CandidateError("runtime_error", f"{where}: {type(exc).__name__}: {str(exc)[:1000]}", text,
                              self.violations)

    def _reference(self, inputs: list[Any]) -> Any:
        self._integrity("before computing the reference")
        with _no_grad():
            out = self.ref_model(*inputs)
        self._sync()
        return out

    def _integrity(self, where: str) -> None:
        """Rationale: patches of the torch namespace, tensor methods, nn classes, dispatcher kernels, timers or the
        evaluator itself would fool the reference or the judge; modes, hooks and tracers left installed would
        rewrite what the checker reads; new threads keep working after forward returns."""
        for name in self.snapshot.patched():
            self.fire("patched_trusted_function", f"{name} was replaced ({where})")
        for op in self.snapshot.dispatcher_changes():
            self.fire("patched_trusted_function", f"the dispatcher kernel of {op} was replaced ({where})")
        for name in timing_mod.patched_primitives():
            self.fire("patched_trusted_function", f"{name} was replaced ({where})")
        for change in self.snapshot.flag_changes():
            self.fire("backend_flags_changed", f"{change} ({where})")
        for leak in self.snapshot.leaks():
            self.fire("dispatcher_mode_leak", f"{leak} ({where})")
        for thread in self.snapshot.new_threads():
            self.fire("background_thread", f"{thread} alive {where}")
        for rule, detail in audit().log.hits:
            self.fire(rule, detail)

    # ----------------------------------------------------------------------------------------- construction
    def _construct(self) -> torch.nn.Module:
        cls = self.cand.model_class
        try:
            reference.seed_all(self.model_seed)
            with torch.device(self.device):
                model = cls(*self.module.get_init_inputs())
            model = model.to(self.device)
        except BaseException as exc:  # noqa: BLE001
            raise self._fail(exc, "ModelNew(*get_init_inputs())") from exc
        if not isinstance(model, torch.nn.Module):
            raise CandidateError("runtime_error", "ModelNew(...) is not a torch.nn.Module")
        # Rationale: inheriting the reference gives its forward for free.
        if any(klass is self.module.Model or klass.__name__ == "Model" for klass in type(model).__mro__[1:]):
            self.fire("torch_fallback", "ModelNew inherits from the reference Model")
        for sub in model.modules():
            if type(sub) is self.module.Model or type(sub).__name__ == "Model":
                self.fire("torch_fallback", "ModelNew holds an instance of the reference Model")
        ref_state = self.ref_model.state_dict()
        own = model.state_dict()
        matched = {k: v for k, v in ref_state.items() if k in own and tuple(own[k].shape) == tuple(v.shape)}
        try:
            model.load_state_dict(matched, strict=False)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, "loading the reference's state_dict") from exc
        missing = [k for k in ref_state if k not in matched]
        if missing:
            self.notes.append(f"reference weights not loaded into ModelNew (no matching name/shape): "
                              f"{', '.join(missing[:8])}; ModelNew was built under the same seed instead")
        return model

    # ---------------------------------------------------------------------------------------------- calling
    def _invoke(self, inputs: list[Any], guard: DispatchGuard | None, where: str) -> Any:
        assert self.model is not None
        try:
            with _no_grad():
                if guard is not None:
                    with guard:
                        out = self.model(*inputs)
                else:
                    out = self.model(*inputs)
            early = self._early_copy(out)
            self._sync()
        except CandidateError:
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from candidate code included
            raise self._fail(exc, where) from exc
        return out, early

    def _early_copy(self, out: Any) -> Any:
        """Rationale: work on another stream. A copy ordered on the caller's current stream (as a user's next
        kernel would be) sees only what that stream waited for; compared with the device-synchronised output, it
        exposes results that arrive later on a stream the timer does not wait for."""
        if not self.cuda:
            return None
        leaves = compare.flatten(out)
        if not all(_type(v) is _Tensor or not isinstance(v, _Tensor) for _, v in leaves):
            return None
        stream = torch.cuda.current_stream(self.device)
        copies = [v.clone() if _type(v) is _Tensor and v.is_cuda else v for _, v in leaves]
        stream.synchronize()
        return _rebuild(out, copies)

    def _padded_inputs(self, inputs: list[Any]) -> tuple[list[Any], list[PaddedBuffer]]:
        """Rationale: fresh addresses every call, and canaries around every input."""
        padded: list[Any] = []
        records: list[PaddedBuffer] = []
        for i, x in enumerate(inputs):
            if isinstance(x, _Tensor):
                view, record = padded_like(x, f"input {i}", poison=False)
                padded.append(view)
                records.append(record)
            else:
                padded.append(x)
        return padded, records

    def check_call(self, name: str, inputs: list[Any], golden: Any, *, guarded: bool = True,
                   padded: tuple[list[Any], list[PaddedBuffer]] | None = None) -> tuple[bool, Any, Any]:
        """One candidate call on ``inputs`` (copied into fresh padded buffers unless ``padded`` is given), all
        per-call checks, and the comparison with ``golden``. Returns (outputs match, output, padded inputs)."""
        args, records = padded if padded is not None else self._padded_inputs(inputs)
        guard = DispatchGuard(strict=self.config.mode == "strict", fp32_task=self.fp32) if guarded else None
        out, early = self._invoke(args, guard, f"forward on input set {name}")
        self.sets_checked += 1
        leaves = compare.flatten(out)
        # Rationale: lazy outputs. A tensor subclass or a wrapper (functional, batched, Python-keyed) can compute
        # its values when read, or report different values to different readers; only plain tensors are judged.
        for path, value in leaves:
            if isinstance(value, _Tensor):
                if _type(value) is not _Tensor:
                    self.fire("lazy_output", f"{path} is {_type(value).__module__}.{_type(value).__qualname__}")
                    continue
                keys = set(str(torch._C._dispatch_keys(value)).strip("DispatchKeySet()").replace(" ", "").split(","))
                odd = {k for k in keys if k and k not in _ALLOWED_KEYS}
                if odd or value.layout != torch.strided or value.is_meta:
                    self.fire("lazy_output", f"{path} is not a materialised dense tensor ({', '.join(sorted(odd)) or value.layout})")
        if any(v.rule == "lazy_output" for v in self.violations):
            if guard is not None:
                guard.report.release()
            return False, out, args
        comparison = compare.compare_outputs(out, golden, self._tol)
        self.max_abs = max(self.max_abs, comparison.max_abs if math.isfinite(comparison.max_abs) else self.max_abs)
        self.max_rel = max(self.max_rel, comparison.max_rel if math.isfinite(comparison.max_rel) else self.max_rel)
        if comparison.ok and early is not None and not _same_values(early, out):
            early_cmp = compare.compare_outputs(early, golden, self._tol)
            if not early_cmp.ok:
                self.fire("foreign_stream", f"set {name}: the output was not ready on the current stream when "
                                            f"forward returned ({early_cmp.reason})")
        # Rationale: stale allocator output. Memory handed out by the guard is poisoned; poison left in an
        # output means the kernels never wrote it, whatever the allocator previously held there.
        for path, value in leaves:
            if _type(value) is _Tensor:
                unwritten = count_poison(value)
                if unwritten:
                    self.fire("unwritten_output", f"set {name}: {unwritten}/{value.numel()} elements of {path} "
                                                  "were never written")
        # Rationale: out-of-bounds writes corrupt neighbouring memory (and can plant results for later calls).
        broken = [r.name for r in records if not r.canaries_intact()]
        if guard is not None:
            broken += guard.report.broken_canaries()
            guard.report.release()
        for buffer in broken:
            self.fire("out_of_bounds_write", f"set {name}: canaries around {buffer} were overwritten")
        # Rationale: mutating inputs can smuggle state between calls or destroy what the reference needs.
        for i, (src, arg) in enumerate(zip(inputs, args)):
            if isinstance(src, _Tensor) and not compare.tensors_equal(src, arg):
                self.fire("input_mutation", f"set {name}: input {i} was modified by forward")
        if guard is not None:
            report = guard.report
            if report.forbidden:
                ops = ", ".join(f"{op} x{n}" for op, n in sorted(report.forbidden.items())[:12])
                self.fire("torch_compute_in_forward", f"PyTorch ops in forward: {ops}")
            if report.half_ops:
                ops = ", ".join(sorted(report.half_ops)[:8])
                self.fire("lowered_precision", f"ops produced fp16/bf16 values in an fp32 task: {ops}")
        self._integrity(f"after forward on set {name}")
        # Rationale: tiny outputs. When a constant would pass the tolerance check, the check says nothing; the
        # error is then judged against the output's own variation.
        if comparison.ok:
            for leaf in comparison.leaves:
                if leaf.reference_tiny and leaf.signal_rel_error > TRIVIAL_SIGNAL_LIMIT:
                    self.fire("trivial_output", f"set {name}: {leaf.path} passes the tolerance only because the "
                                                f"outputs are tiny; its error is {leaf.signal_rel_error:.2f} of the "
                                                "output's variation")
        elif not any(v.rule == "lazy_output" for v in self.violations):
            self._last_reason = comparison.reason
        return comparison.ok, out, args

    # ----------------------------------------------------------------------------------------------- probes
    def _fresh(self, seed: int) -> tuple[list[Any], Any]:
        inputs = reference.make_inputs(self.module, seed, self.device)
        return inputs, self._reference(inputs)

    def _cache_probe(self, args: list[Any], prev_out_copy: Any, seed: int) -> None:
        """Rationale: caching across calls. The same tensor objects (same addresses, ids and version counters)
        are refilled with new values behind the version counter; a result keyed on any of those comes back
        stale."""
        new_inputs = reference.make_inputs(self.module, seed, self.device)
        for arg, new in zip(args, new_inputs):
            if isinstance(arg, _Tensor):
                _data_of(arg).copy_(new)
        golden = self._reference(new_inputs)
        ok, out, _ = self.check_call("cache-probe", new_inputs, golden, padded=(args, []))
        if not ok and prev_out_copy is not None:
            stale = compare.compare_outputs(out, prev_out_copy, lambda _: (0.0, 0.0))
            detail = "forward returned the previous call's result for new values at the same addresses" if stale.ok \
                else "forward's result was wrong when the same tensors were refilled with new values"
            self.fire("cached_output", detail)

    def _clone_out(self, out: Any) -> Any:
        leaves = compare.flatten(out)
        if not all(_type(v) is _Tensor or not isinstance(v, _Tensor) for _, v in leaves):
            return None
        return _rebuild(out, [v.clone() if _type(v) is _Tensor else v for _, v in leaves])

    def _variants(self, passed_fresh: bool) -> None:
        seeds = self.seeds
        n = self.config.n_trials
        if not passed_fresh:
            # Rationale: results valid only for get_inputs' canonical seed (precomputed or tuned outputs).
            inputs, golden = self._fresh(reference.CANONICAL_SEED)
            ok, _, _ = self._safe_check("canonical-seed", inputs, golden)
            self.checks.append("canonical_seed")
            if ok:
                self.fire("seed_specialized", "correct for seed 42 but not for fresh seeds")
            return
        if not self.config.variants:
            return
        # Rationale: results valid only for get_inputs' value distribution (range assumptions, clamping).
        base = reference.make_inputs(self.module, seeds[n], self.device)
        scaled = reference.scaled(base)
        if scaled is not None:
            golden = self._reference(scaled)
            if all(_finite(v) for _, v in compare.flatten(golden)):
                self.checks.append("scaled_inputs")
                ok, _, _ = self._safe_check(f"scaled-x{reference.SCALE_FACTOR:g}", scaled, golden)
                if not ok:
                    self.fire("distribution_specialized", f"wrong on inputs scaled by {reference.SCALE_FACTOR:g} "
                                                          f"({getattr(self, '_last_reason', '')})")
            else:
                self.notes.append("scaled-input check skipped: the reference is not finite on scaled inputs")
            golden = None
        base = scaled = None  # 7 GiB each for the largest KernelBench inputs: gone before the next set is made
        # Rationale: results valid only for get_inputs' exact shapes (hard-coded sizes, missing bounds checks).
        variant = reference.shape_variant(self.task.code, f"<task {self.task.id}>", self.module)
        if variant is None:
            self.notes.append("shape check skipped: no size constant can change without changing the model")
            return
        self.checks.append("other_shapes")
        try:
            inputs = reference.make_inputs(variant.module, seeds[n + 1], self.device)
            golden = self._reference(inputs)
        except Exception as exc:  # noqa: BLE001 - the reference itself does not take other shapes
            self.notes.append(f"shape check skipped: the reference fails with {variant.description}: {exc}")
            return
        ok, _, _ = self._safe_check(f"shape {variant.description}", inputs, golden, rule="shape_specialized")
        if not ok:
            self.fire("shape_specialized", f"wrong with {variant.description} ({getattr(self, '_last_reason', '')})")

    def _safe_check(self, name: str, inputs: list[Any], golden: Any, rule: str | None = None) -> tuple[bool, Any, Any]:
        try:
            return self.check_call(name, inputs, golden)
        except CandidateError as exc:
            if rule is None or exc.stage != "runtime_error" or "illegal" in exc.reason.lower():
                raise
            self._last_reason = exc.reason
            return False, None, None

    def _unaudited_call(self) -> None:
        """Rationale: a candidate that can tell it is being audited (the guard is a visible dispatch mode) may
        behave only while audited; one call runs exactly as timing runs it, without the guard."""
        inputs, golden = self._fresh(self.seeds[self.config.n_trials + 2])
        ok, _, _ = self.check_call("unaudited", inputs, golden, guarded=False)
        self.checks.append("unaudited_call")
        if not ok:
            self.fire("audit_evasion", "correct under the dispatcher guard, wrong without it")

    def _precision_probe(self) -> None:
        """Rationale: lowered precision. fp16/bf16/TF32 pass a 1e-2 tolerance on benign inputs, but their error
        against a float64 reference is orders of magnitude above any fp32 computation's; the fp32 reference's own
        error sets the scale, so ill-conditioned tasks do not false-fire."""
        if not (self.fp32 and self.config.precision_probe):
            return
        inputs = reference.make_inputs(self.module, self.seeds[self.config.n_trials + 3], self.device)
        if self.cuda:
            # float64 inputs, intermediates and output (2x each); the fp32 reference's intermediates and output, the
            # padded inputs, the candidate's output and its early copy (1x each): about 12x the inputs
            _release_cached_memory(self.cuda)
            need = 12 * sum(x.numel() * x.element_size() for x in inputs if isinstance(x, _Tensor))
            free, _ = torch.cuda.mem_get_info(self.device)
            if need > free:
                self.notes.append(f"precision probe skipped: it needs about {need >> 30} GiB for these inputs, more "
                                  f"than the free device memory ({free >> 30} GiB)")
                return
        try:
            ref64 = copy.deepcopy(self.ref_model).double()
            inputs64 = [x.double() if isinstance(x, _Tensor) and x.dtype.is_floating_point else x for x in inputs]
            with _no_grad():
                out64 = ref64(*inputs64)
            self._sync()
        except Exception as exc:  # noqa: BLE001 - some ops have no float64 kernel
            self.notes.append(f"precision probe skipped: the reference does not run in float64 ({exc})"[:300])
            return
        golden = self._reference(inputs)
        ok, out, _ = self.check_call("precision-probe", inputs, golden)
        self.checks.append("precision_probe")
        if not ok:
            return
        for (path, c), (_, r32), (_, r64) in zip(compare.flatten(out), compare.flatten(golden), compare.flatten(out64)):
            if not (isinstance(r64, _Tensor) and r64.dtype.is_floating_point and r64.numel()):
                continue
            e_ref = _rel_err(r32, r64)
            e_cand = _rel_err(c, r64)
            if e_cand > max(PRECISION_RATIO * e_ref, PRECISION_FLOOR):
                self.fire("lowered_precision", f"{path}: relative error vs float64 {e_cand:.2e}, the fp32 "
                                               f"reference's is {e_ref:.2e}")
        del ref64, out64

    # ------------------------------------------------------------------------------------------------- main
    def run(self) -> EvalResult:
        started = _perf()
        clock = self.clock
        with clock("construct"):
            self.model = self._construct()
            self._integrity("after loading the candidate")
        n = self.config.n_trials
        passed = 0
        last: tuple[list[Any], Any] | None = None
        first_reason = ""
        earlier: list[Any] = []  # fingerprints of every earlier fresh set's output
        keep_alive: Any = None
        with clock("fresh_sets"):
            for i in range(n):
                inputs, golden = self._fresh(self.seeds[i])
                ok, out, args = self.check_call(f"fresh-{i}", inputs, golden)
                passed += ok
                if not ok and not first_reason:
                    first_reason = getattr(self, "_last_reason", "")
                mark = compare.fingerprint(out) if out is not None else None
                if not ok and mark is not None and mark in earlier:
                    # Rationale: caching across calls. A wrong answer equal to any earlier call's answer is a result
                    # reused for new inputs (keyed on an address the allocator handed out again, an id, a version).
                    self.fire("cached_output", f"set fresh-{i} returned the result of an earlier call")
                earlier.append(mark)
                if ok:
                    last = (args, self._clone_out(out))
                keep_alive = args  # fresh addresses: the next set's buffers cannot reuse this one's memory
                del inputs, golden, out
            keep_alive = args = None  # the last set's buffers are not needed past here
            _release_cached_memory(self.cuda)
        self.checks += ["fresh_inputs", "dispatcher_guard", "canaries", "poison", "input_mutation", "threads",
                        "integrity", "audit_hook"]
        all_passed = passed == n
        if all_passed and last is not None:
            with clock("cache_probe"):
                self._cache_probe(last[0], last[1], self.seeds[n + 1] ^ 0x5EED)
                self.checks.append("cache_probe")
                last = None
                _release_cached_memory(self.cuda)
            with clock("unaudited_call"):
                self._unaudited_call()
        with clock("variants"):
            self._variants(all_passed)
        if all_passed:
            with clock("precision_probe"):
                self._precision_probe()
        if all_passed and not self.violations and self.cuda and self.config.runtime_audit:
            with clock("runtime_audit"):
                self._runtime_audit()
        verify_s = _perf() - started
        _release_cached_memory(self.cuda)
        common = dict(solution_kind=self.cand.kind, device=str(self.device), checks_run=tuple(self.checks),
                      notes=tuple(self.notes), build_seconds=self.cand.build_seconds, verify_seconds=verify_s,
                      max_abs_error=self.max_abs, max_rel_error=self.max_rel, input_sets_checked=self.sets_checked,
                      extra={"phase_seconds": clock.seconds})
        if self.violations:
            return failure(self.task.id, "rule_violation", "; ".join(str(v) for v in self.violations[:3]),
                           rules_fired=tuple(self.violations), **common)
        if not all_passed:
            return failure(self.task.id, "incorrect", f"{n - passed}/{n} fresh input sets mismatch: {first_reason}",
                           **common)
        if not self.config.profile:
            result = EvalResult(task_id=self.task.id, stage="correct", correct=True, **common)
            return _with_reward(result, self.config)
        with clock("profile"):
            return self._profile(common)

    def _runtime_audit(self) -> None:
        inputs = reference.make_inputs(self.module, self.seeds[0] ^ 0xA0D17, self.device)
        assert self.model is not None
        self._integrity("before the kernel audit")
        for rule, detail in runtime_audit.audit_kernels(self.model, inputs, cand=self.cand,
                                                        strict=self.config.mode == "strict", fp32_task=self.fp32,
                                                        notes=self.notes):
            self.fire(rule, detail)
        self.snapshot.refresh_threads()  # the profiler's own (CUPTI) threads are the evaluator's, not the candidate's
        self.checks.append("runtime_kernel_audit")

    def _profile(self, common: dict[str, Any]) -> EvalResult:
        from cuda_agent.evaluator.profiling_step import profile_candidate

        return profile_candidate(self, common)


def _rebuild(out: Any, leaves: list[Any]) -> Any:
    """``leaves`` (from `compare.flatten(out)`) put back into ``out``'s container structure.

    No nested recursive function here: a closure that calls itself is a reference cycle, and its cell would keep the
    leaves (copies of 6 GiB outputs) alive until the garbage collector runs."""
    return _rebuild_from(out, iter(leaves))


def _rebuild_from(obj: Any, leaves: Any) -> Any:
    if _type(obj) in (tuple, list):
        return _type(obj)(_rebuild_from(x, leaves) for x in obj)
    return next(leaves)


def _same_values(a: Any, b: Any) -> bool:
    """Every tensor leaf of ``a`` bitwise equal to ``b``'s (then ``a`` compares with any reference as ``b`` does)."""
    pairs = list(zip(compare.flatten(a), compare.flatten(b)))
    return all(_type(x) is _Tensor and _type(y) is _Tensor and compare.tensors_equal(x, y)
               for (_, x), (_, y) in pairs if isinstance(x, _Tensor) or isinstance(y, _Tensor))


def _finite(value: Any) -> bool:
    if isinstance(value, _Tensor) and value.dtype.is_floating_point:
        return bool(torch.isfinite(value).all().item())
    return True


_REL_ERR_CHUNK = 1 << 24  # elements: float64 temporaries stay at 128 MiB however large the output


def _rel_err(a: torch.Tensor, ref64: torch.Tensor) -> float:
    """‖a − ref64‖ / ‖ref64‖ in float64, in chunks (a whole-tensor float64 copy of a 7 GiB output is 14 GiB)."""
    flat_a, flat_r = a.reshape(-1), ref64.reshape(-1)
    diff_sq = scale_sq = 0.0
    for start in range(0, flat_r.numel(), _REL_ERR_CHUNK):
        r = flat_r[start:start + _REL_ERR_CHUNK]
        d = flat_a[start:start + _REL_ERR_CHUNK].double() - r
        diff_sq += float((d * d).sum().item())
        scale_sq += float((r * r).sum().item())
    diff, scale = math.sqrt(diff_sq), math.sqrt(scale_sq)
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def _with_reward(result: EvalResult, config: EvalConfig) -> EvalResult:
    from dataclasses import replace

    return replace(result, reward=reward(result, config.speed_threshold), continuous_reward=continuous(result))
