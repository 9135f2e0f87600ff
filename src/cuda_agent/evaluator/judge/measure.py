"""The judge's measurements: baselines (eager and torch.compile, measured only where no candidate code has run),
the candidate's times from its samples and their cross-check on the judge's own clock, the drift correction, and
the hardware floor.

How a candidate that runs arbitrary native code in its own process is kept from faking its time: the times its
process reports (CUDA events around forward, a host clock around the device-synchronised call) are only accepted
when the judge's own clock agrees. The judge times every round trip itself, from sending the call to receiving the
reply, after which the candidate is frozen (SIGSTOP); the same round trip of the runner's own null model (no
candidate code yet, the same output copy and synchronisation) is the overhead. The judge's time less that overhead
bounds what the call really took; a reported median below that bound, beyond the clock's noise and
``EvalConfig.timing_tolerance``, fires ``timing_mismatch``. Work left running after forward returns is either
finished by the device-wide synchronisation before the reply (and so inside the judge's clock) or still running
when the judge reads the outputs it must already have written (and so wrong).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from cuda_agent.evaluator import timing
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.judge import reference
from cuda_agent.evaluator.judge.session import Sample
from cuda_agent.evaluator.stats import TimingStats, median

PAIRED_TIME_CAP_S = 0.5
CROSS_CHECK_FLOOR_MS = 0.01


def candidate_stats(samples: list[Sample], null: list[Sample], cuda: bool) -> TimingStats:
    """The candidate's per-call times as its process reported them: event times, or device-wide times where its
    host clock (less its copy and the null call's host overhead) shows work the events missed."""
    overhead = median([max(0.0, s.host_ms - s.copy_ms - s.event_ms) for s in null]) if null else 0.0
    events = [s.event_ms for s in samples]
    hosts = [max(0.0, s.host_ms - s.copy_ms - overhead) for s in samples]
    return timing.summarise(events, hosts, cuda, timing.TimingConfig())


@dataclass(frozen=True)
class CrossCheck:
    """The judge's clock against the reported time: ``bound_ms`` (median round trip less the null round trip),
    ``allowed_ms`` (the reported median with the tolerance and the clock's noise) and whether it holds."""

    ok: bool
    bound_ms: float
    reported_ms: float
    allowed_ms: float
    noise_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "bound_ms": self.bound_ms, "reported_ms": self.reported_ms,
                "allowed_ms": self.allowed_ms, "noise_ms": self.noise_ms}


def cross_check(stats: TimingStats, samples: list[Sample], null: list[Sample], tolerance: float) -> CrossCheck:
    """Rationale: a candidate with native code can rewrite any number its process reports. The judge's own clock of
    the round trips bounds the real time from below; see the module docstring. (Judged on a GPU only: on a CPU the
    candidate's compute threads and the judge share the cores with everything else, and the bound is noise.)"""
    overhead = median([s.wall_ms for s in null])
    bound = median([s.wall_ms for s in samples]) - overhead
    spread = median([abs(s.wall_ms - overhead) for s in null])  # median absolute deviation of the overhead
    noise = CROSS_CHECK_FLOOR_MS + 3.0 * 1.4826 * spread * 1.2533 * (1 / math.sqrt(len(null)) + 1 / math.sqrt(
        max(1, len(samples))))
    allowed = stats.median_ms * (1.0 + tolerance) + noise
    return CrossCheck(bound <= allowed, bound, stats.median_ms, allowed, noise)


def timing_set_count(inputs: list[Any], device: torch.device) -> int:
    """How many input buffer sets the timed calls rotate through: up to 3, within a tenth of the device's memory
    (each set is an input copy in shared memory beside the judge's own copy and the outputs)."""
    per_set = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) * 3
    if device.type != "cuda" or per_set == 0:
        return 2
    budget = torch.cuda.get_device_properties(device).total_memory // 10
    return int(max(1, min(3, budget // max(per_set, 1))))


def baseline_key_for(task_hash: str, config: EvalConfig, device: torch.device, n_sets: int) -> str:
    from cuda_agent.evaluator.baselines import baseline_key

    return baseline_key(task_hash, **_key_parts(config, device, n_sets))


def _key_parts(config: EvalConfig, device: torch.device, n_sets: int) -> dict[str, Any]:
    """What a baseline key is made of besides the task (kept in the record: the trusted caller recomputes the key)."""
    from cuda_agent.evaluator.baselines import environment_key_parts

    settings = {"warmup": config.warmup, "reps": config.reps, "sets": n_sets, "device": device.type}
    return {"settings": settings, **environment_key_parts(device)}


def measure_baselines_for(task_hash: str, ref_model: torch.nn.Module, module: Any, config: EvalConfig,
                          device: torch.device, seeds: list[int], *, refresh: bool = False) -> tuple[Any, bool]:
    """Eager and torch.compile times of the reference, cached per task, GPU, versions and settings. The judge calls
    this before the candidate's code is loaded anywhere, or after its process has ended (``refresh``), never while
    candidate code can run on the device."""
    from cuda_agent.evaluator.baselines import BaselineCache, measure_baselines

    probe = reference.make_inputs(module, seeds[0], device)
    n_sets = 3
    key = baseline_key_for(task_hash, config, device, n_sets)

    def measure() -> Any:
        # Rationale: inductor's parallel compile starts worker processes that outlive the compile.
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1
        sets = [probe] + [reference.make_inputs(module, s, device) for s in seeds[1:n_sets]]
        return measure_baselines(ref_model, sets, warmup=config.warmup, reps=config.reps, key=key,
                                 breakdown=device.type == "cuda")

    return BaselineCache(config.baseline_cache_dir).get_or_measure(
        key, measure, {"task": task_hash, **_key_parts(config, device, n_sets)}, refresh=refresh)


def drift_factor(paired_ms: float, cached_ms: float) -> float:
    """How much slower (>1) or faster (<1) eager PyTorch ran now than when its time was cached. Raises ValueError on
    times that are not positive and finite."""
    if not (math.isfinite(paired_ms) and math.isfinite(cached_ms)) or paired_ms <= 0 or cached_ms <= 0:
        raise ValueError(f"drift_factor: times must be positive and finite, got {paired_ms} and {cached_ms} ms")
    return paired_ms / cached_ms


def time_reference_again(ref_model: torch.nn.Module, sets: list[list[Any]], config: EvalConfig) -> TimingStats:
    """Eager PyTorch on the candidate's own timing buffers, in the judge, after the candidate's process ended."""
    return timing.time_forward(ref_model, sets, warmup=config.warmup, reps=config.reps,
                               config=timing.TimingConfig(time_cap_s=PAIRED_TIME_CAP_S))


def output_floor_ms(outputs: list[torch.Tensor], device: torch.device) -> float:
    """The time no correct implementation can beat: writing the outputs once at the device's peak bandwidth.
    Rationale: a floor built from the reference's FLOPs or input reads is not a floor (an algebraic shortcut or
    preprocessing in ``__init__`` can avoid both); writing every output element cannot be avoided."""
    from cuda_agent.evaluator.speed_of_light import gpu_spec

    spec = gpu_spec(device)
    written = sum(t.numel() * t.element_size() for t in outputs if isinstance(t, torch.Tensor))
    return written / (spec.mem_bandwidth_gbs * 1e6)
