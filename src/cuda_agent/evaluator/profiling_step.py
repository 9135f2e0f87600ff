"""Timing after a correct verification: the candidate timed with outputs re-checked (on inputs refilled in place),
baselines from the cache (measured before the candidate loaded) corrected for drift by eager PyTorch timed again on
the candidate's inputs, speedups with spread, the speed-of-light floor, and the reward."""
from __future__ import annotations

import logging
import math
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from cuda_agent.evaluator import compare, reference
from cuda_agent.evaluator.result import EvalResult, continuous, failure, reward

if TYPE_CHECKING:
    from cuda_agent.evaluator.verify import Verifier

log = logging.getLogger(__name__)
_perf = time.perf_counter
_data_of = torch.Tensor.data.__get__


def timing_set_count(inputs: list[Any], device: torch.device, *, fit_free: bool = False) -> int:
    """How many input sets to rotate through while timing: up to 5, within a fifth of the device's memory.

    The count is part of the baseline cache key, so it depends on the device alone, not on what happens to be free
    at the moment (a count from free memory changed with the allocator's state and missed the cache). ``fit_free``
    also keeps the sets within a third of the memory free now (the candidate's timing, which needs no key)."""
    per_set = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) * 2
    if device.type != "cuda" or per_set == 0:
        return 3
    budget = torch.cuda.get_device_properties(device).total_memory // 5
    if fit_free:
        budget = min(budget, torch.cuda.mem_get_info(device)[0] // 3)
    return int(max(1, min(5, budget // max(per_set, 1))))


def measure_baselines_for(task_hash: str, ref_model: torch.nn.Module, module: Any, config: Any,
                          device: torch.device, seeds: list[int]) -> tuple[Any, bool]:
    """Eager and torch.compile times of the reference: cached per task, GPU, versions and settings. Called
    before any candidate code loads, so that nothing the candidate does can slow the baselines down."""
    from cuda_agent.evaluator.baselines import (BaselineCache, baseline_key, environment_key_parts,
                                                measure_baselines)

    probe = reference.make_inputs(module, seeds[0], device)
    n_sets = timing_set_count(probe, device)
    settings = {"warmup": config.warmup, "reps": config.reps, "sets": n_sets, "device": device.type}
    key = baseline_key(task_hash, settings=settings, **environment_key_parts(device))
    cache = BaselineCache(config.baseline_cache_dir)

    def measure() -> Any:
        # Rationale: inductor's parallel compile starts worker processes and timer threads that outlive the
        # compile; in the evaluation process they would read as the candidate's background threads.
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1
        sets = [probe] + [reference.make_inputs(module, s, device) for s in seeds[1:n_sets]]
        return measure_baselines(ref_model, sets, warmup=config.warmup, reps=config.reps, key=key,
                                 breakdown=device.type == "cuda")

    return cache.get_or_measure(key, measure)


def profile_candidate(v: "Verifier", common: dict[str, Any]) -> EvalResult:
    from cuda_agent.evaluator.timing import OutputMismatchDuringTiming, time_forward
    from cuda_agent.evaluator.reward_schedule import speedup_with_spread

    started = _perf()
    config = v.config
    base_seed = v.seeds[0] ^ 0x7135
    first = reference.make_inputs(v.module, base_seed, v.device)
    n_sets = timing_set_count(first, v.device, fit_free=True)
    sets = [first] + [reference.make_inputs(v.module, base_seed + k, v.device) for k in range(1, n_sets)]
    goldens = [v._reference(s) for s in sets]
    refills = [0]

    def check(i: int, out: Any) -> bool:
        result = compare.compare_outputs(out, goldens[i], v._tol)
        if not result.ok:
            v._last_reason = result.reason
        return result.ok

    def before_check(i: int) -> None:
        # Rationale: caching keyed on the timing sets' addresses; checked calls see new values in place.
        refills[0] += 1
        fresh = reference.make_inputs(v.module, base_seed ^ (0xF00D + refills[0]), v.device)
        for arg, new in zip(sets[i], fresh):
            if isinstance(arg, torch.Tensor):
                _data_of(arg).copy_(new)
        goldens[i] = v._reference(fresh)

    assert v.model is not None
    try:
        stats = time_forward(v.model, sets, warmup=config.warmup, reps=config.reps, check=check,
                             before_check=before_check)
    except OutputMismatchDuringTiming as exc:
        # Rationale: correct while verified, wrong while timed.
        v.fire("audit_evasion", f"wrong output during timing: {exc}"[:400])
        stats = None
    except Exception as exc:  # noqa: BLE001
        err = v._fail(exc, "forward during timing")
        return failure(v.task.id, err.stage, err.reason, log=err.log, rules_fired=tuple(v.violations), **common)
    del goldens[1:]  # the speed-of-light estimate needs the first set's outputs only
    eager_paired = _time_reference_again(v, sets) if stats is not None and v.baselines is not None else None
    v._integrity("after timing")
    profile_s = _perf() - started
    common = {**common, "profile_seconds": profile_s}
    if v.violations or stats is None:
        return failure(v.task.id, "rule_violation", "; ".join(str(x) for x in v.violations[:3]),
                       rules_fired=tuple(v.violations), candidate=stats, **common)
    base = v.baselines
    fields: dict[str, Any] = {"candidate": stats}
    if base is not None:
        drift = 1.0
        if eager_paired is not None:
            measured, drift = drift_factor(eager_paired.median_ms, base.eager.median_ms, config.baseline_drift_limit)
            if drift != measured:
                v.notes.append(f"eager PyTorch ran {measured:.3f}x its cached time now; the baselines were scaled "
                               f"by {drift:.3f}x only (baseline_drift_limit {config.baseline_drift_limit})")
            fields.update(eager_paired=eager_paired, baseline_drift=drift)
        s_e, lo_e, hi_e = speedup_with_spread(base.eager.scaled(drift), stats)
        s_c, lo_c, hi_c = speedup_with_spread(base.compile.scaled(drift), stats)
        fields.update(eager=base.eager, compile=base.compile, speedup_eager=s_e, speedup_eager_low=lo_e,
                      speedup_eager_high=hi_e, speedup_compile=s_c, speedup_compile_low=lo_c,
                      speedup_compile_high=hi_c)
        if base.compile_error:
            v.notes.append(f"torch.compile baseline fell back to eager: {base.compile_error[:200]}")
    _speed_of_light(v, sets[0], goldens[0], stats, fields)
    if config.kernel_breakdown:
        _breakdown(v, sets[0], fields)
    common["notes"] = tuple(v.notes)
    if v.violations:
        return failure(v.task.id, "rule_violation", "; ".join(str(x) for x in v.violations[:3]),
                       rules_fired=tuple(v.violations), **fields, **common)
    result = EvalResult(task_id=v.task.id, stage="timed", correct=True, **fields, **common)
    return replace(result, reward=reward(result, config.speed_threshold), continuous_reward=continuous(result))


PAIRED_TIME_CAP_S = 0.5


def drift_factor(paired_ms: float, cached_ms: float, limit: float) -> tuple[float, float]:
    """(measured, applied): how much slower (>1) or faster (<1) eager PyTorch ran now than when its time was cached,
    and that ratio capped to [1/(1+limit), 1+limit]. A limit of 0 applies no correction. Raises ValueError on
    times that are not positive and finite, or a negative limit."""
    if not (math.isfinite(paired_ms) and math.isfinite(cached_ms)) or paired_ms <= 0 or cached_ms <= 0:
        raise ValueError(f"drift_factor: times must be positive and finite, got {paired_ms} and {cached_ms} ms")
    if limit < 0:
        raise ValueError(f"drift_factor: limit must be >= 0, got {limit}")
    measured = paired_ms / cached_ms
    return measured, min(max(measured, 1.0 / (1.0 + limit)), 1.0 + limit)


def _time_reference_again(v: "Verifier", sets: list[list[Any]]) -> Any:
    """Eager PyTorch timed on the candidate's own timing inputs, right after the candidate.

    Rationale: baselines are cached, so a candidate timed while the GPU runs a little slower or faster (clocks, where
    this evaluation's inputs landed in memory) would carry that drift into its speedup; the same reference on the
    same buffers moments later sees the same conditions. The candidate's code can still run here only through state
    it left behind, which the integrity checks after timing look for, and the correction is capped."""
    from cuda_agent.evaluator.timing import TimingConfig, time_forward

    if v.config.baseline_drift_limit <= 0:
        return None
    try:
        # A quarter of the usual time cap: the median of the minimum repetitions is plenty for a correction that is
        # capped at a few percent (the full cap doubled the profile phase of tasks whose spread converges slowly).
        return time_forward(v.ref_model, sets, warmup=v.config.warmup, reps=v.config.reps,
                            config=TimingConfig(time_cap_s=PAIRED_TIME_CAP_S))
    except Exception as exc:  # noqa: BLE001 - the cached baselines still stand
        v.notes.append(f"eager PyTorch could not be timed again: {type(exc).__name__}: {exc}"[:300])
        return None


def _speed_of_light(v: "Verifier", inputs: list[Any], outputs: Any, stats: Any, fields: dict[str, Any]) -> None:
    """Rationale: a time below what the hardware can do is a timing cheat nobody has listed yet."""
    if v.device.type != "cuda":
        return
    try:
        from cuda_agent.evaluator.speed_of_light import estimate, gpu_spec

        est = estimate(v.ref_model, inputs, outputs, gpu_spec(v.device))
    except Exception as exc:  # noqa: BLE001 - no estimate is a note, not a failure
        v.notes.append(f"speed-of-light estimate unavailable: {type(exc).__name__}: {exc}"[:300])
        return
    floor = float(est.floor_ms)
    if floor <= 0:
        return
    fields.update(sol_floor_ms=floor, sol_fraction=floor / stats.median_ms, sol_bound=str(est.bound))
    v.checks.append("speed_of_light")
    if stats.median_ms < floor * v.config.sol_tolerance:
        v.fire("below_speed_of_light", f"timed {stats.median_ms:.4f} ms; the hardware floor is {floor:.4f} ms "
                                       f"({est.bound}-bound)")


def _breakdown(v: "Verifier", inputs: list[Any], fields: dict[str, Any]) -> None:
    try:
        from cuda_agent.evaluator.profile import breakdown_rows

        with torch.no_grad():
            fields["kernel_breakdown"] = breakdown_rows(v.model, inputs)
        if v.baselines is not None:
            fields["compile_kernel_breakdown"] = v.baselines.compile_kernels
    except Exception as exc:  # noqa: BLE001
        v.notes.append(f"kernel breakdown unavailable: {type(exc).__name__}: {exc}"[:300])
