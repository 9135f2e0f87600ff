"""`EvalResult`: what one evaluation found, frozen and JSON-serialisable; `reward(result)` turns it into the paper's
reward."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from cuda_agent.evaluator.rules import RuleViolation
from cuda_agent.evaluator.reward_schedule import REWARD_CORRECT, REWARD_INCORRECT, continuous_reward, discrete_reward
from cuda_agent.evaluator.stats import TimingStats

# The stages an evaluation can end in, in pipeline order. Only "correct" and "timed" are correct results.
STAGES = (
    "skipped",            # nothing was checked: no GPU where the agent ran (its builds are real); see `reason`
    "eval_error",         # the evaluator itself failed (not the candidate's fault); see `reason`
    "build_failed",       # the kernels (or a single-file solution's inline extension) did not compile
    "protected_changed",  # a protected workspace file was edited
    "timeout",            # the evaluation ran past its time limit (a hang, an endless kernel)
    "crashed",            # the process died (segfault, abort, killed)
    "out_of_memory",      # device or host memory ran out
    "runtime_error",      # the candidate raised (an illegal memory access, a failed CA_CHECK, a Python error)
    "rule_violation",     # an anti-cheat rule fired (see rules_fired)
    "incorrect",          # outputs differ from the reference
    "correct",            # verified correct; not timed (profile off)
    "timed",              # verified correct and timed
)
CORRECT_STAGES = ("correct", "timed")


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(0, limit // 2 - 20)
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters trimmed] ...\n{text[-half:]}"


@dataclass(frozen=True)
class EvalResult:
    """One evaluation's outcome.

    ``stage`` is where it ended (see STAGES); ``reason`` says why in a sentence the agent can act on. Times are the
    profile's (None when not timed); speedups are baseline median / candidate median, with ``*_low``/``*_high`` the
    range the medians' confidence intervals allow. ``eager`` and ``compile`` are the cached baselines as measured
    before the candidate loaded; ``eager_paired`` is eager PyTorch timed again on the candidate's own timing inputs;
    on a GPU all three are scaled to the judge's clock by ``extra["judge_clock"]["clock_factor"]`` (the reference
    timed as a candidate against the same in the judge's process; the in-process times are in ``extra`` too),
    and ``baseline_drift`` the factor (eager_paired / eager, capped by the config's ``baseline_drift_limit``) that
    both baselines were multiplied by for the speedups and the continuous reward. ``sol_fraction`` is the speed-of-light floor divided by the
    candidate's time (1.0 = at the hardware floor). ``reward`` is the paper's -1/1/2/3, ``continuous_reward``
    compile time / candidate time (or -1).
    """

    task_id: str
    stage: str
    correct: bool
    reason: str = ""
    mode: str = "strict"
    solution: str = ""
    solution_kind: str = ""
    rules_fired: tuple[RuleViolation, ...] = ()
    eager: TimingStats | None = None
    compile: TimingStats | None = None
    candidate: TimingStats | None = None
    eager_paired: TimingStats | None = None
    baseline_drift: float | None = None
    speedup_eager: float | None = None
    speedup_eager_low: float | None = None
    speedup_eager_high: float | None = None
    speedup_compile: float | None = None
    speedup_compile_low: float | None = None
    speedup_compile_high: float | None = None
    sol_floor_ms: float | None = None
    sol_fraction: float | None = None
    sol_bound: str | None = None
    reward: int = REWARD_INCORRECT
    continuous_reward: float = float(REWARD_INCORRECT)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    input_sets_checked: int = 0
    checks_run: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    build_seconds: float | None = None
    verify_seconds: float | None = None
    profile_seconds: float | None = None
    total_seconds: float | None = None
    device: str = ""
    kernel_breakdown: tuple[dict[str, Any], ...] = ()
    compile_kernel_breakdown: tuple[dict[str, Any], ...] = ()
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; one of {', '.join(STAGES)}")
        if self.correct and self.stage not in CORRECT_STAGES:
            raise ValueError(f"a result at stage {self.stage!r} cannot be correct")

    @property
    def rule_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.rule for v in self.rules_fired))

    @property
    def passed(self) -> bool:
        """Correct at a correct stage with no rule fired: what every reward and benchmark counts as correct."""
        return self.correct and self.stage in CORRECT_STAGES and not self.rules_fired

    def baseline_ms(self, name: str) -> float | None:
        """The median of baseline ``name`` (``eager`` or ``compile``) as the speedups used it: the cached time times
        ``baseline_drift`` where eager PyTorch was timed again during the evaluation. None when not timed."""
        if name not in ("eager", "compile"):
            raise ValueError(f"baseline must be 'eager' or 'compile', got {name!r}")
        stats = getattr(self, name)
        if stats is None:
            return None
        return stats.median_ms * (self.baseline_drift if self.baseline_drift is not None else 1.0)

    @property
    def candidate_ms(self) -> float | None:
        return self.candidate.median_ms if self.candidate is not None else None

    @property
    def precision_share(self) -> float | None:
        """The largest share of its fp32 precision bound that the candidate's error took (1.0: at the bound, above:
        refused as lowered_precision), over the every-call check and the float64 probe; None where neither ran."""
        record = self.extra.get("precision") or {}
        shares = [record[k] for k in ("every_call_headroom", "probe_headroom") if record.get(k) is not None]
        return max(shares) if shares else None

    def precision_summary(self) -> str:
        """One line on the precision check for people and agents, or "" where it did not run."""
        share = self.precision_share
        if share is None:
            return ""
        record = self.extra.get("precision") or {}
        floor = record.get("floor_units")
        where = f"; floor {floor:.0f} fp32 units, {record['depth']}" if floor and record.get("depth") else ""
        return f"largest error {100 * share:.0f}% of the fp32 precision bound{where}"

    def trimmed(self, max_log_chars: int) -> "EvalResult":
        return replace(self, log=_trim(self.log, max_log_chars), reason=_trim(self.reason, max_log_chars))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "rules_fired":
                value = [v.to_dict() for v in value]
            elif isinstance(value, TimingStats):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, float) and not math.isfinite(value):
                value = None
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalResult":
        known = {f.name for f in fields(cls)}
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        kwargs["rules_fired"] = tuple(RuleViolation.from_dict(v) for v in data.get("rules_fired", ()))
        for name in ("eager", "compile", "candidate", "eager_paired"):
            if kwargs.get(name) is not None:
                kwargs[name] = TimingStats.from_dict(kwargs[name])
        for name in ("checks_run", "notes"):
            kwargs[name] = tuple(kwargs.get(name, ()))
        for name in ("kernel_breakdown", "compile_kernel_breakdown"):
            kwargs[name] = tuple(dict(k) for k in kwargs.get(name, ()))
        return cls(**kwargs)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> "EvalResult":
        return cls.from_dict(json.loads(text))


def failure(task_id: str, stage: str, reason: str, **kwargs: Any) -> EvalResult:
    """An incorrect result at ``stage`` with the schedule's reward for an incorrect result."""
    return EvalResult(task_id=task_id, stage=stage, correct=False, reason=reason, reward=REWARD_INCORRECT,
                      continuous_reward=float(REWARD_INCORRECT), **kwargs)


def reward(result: EvalResult, threshold: float = 0.05) -> int:
    """The paper's discrete reward of a result: -1 unless correct; 3/2/1 by the speedups (1 when not timed)."""
    return discrete_reward(result.passed, result.speedup_eager, result.speedup_compile, threshold)


def continuous(result: EvalResult) -> float:
    """compile time (times the baseline drift) / candidate time when correct and timed; -1 when incorrect; the
    schedule's correct reward (1) when correct but not timed."""
    if result.passed and (result.compile is None or result.candidate is None):
        return float(REWARD_CORRECT)
    return continuous_reward(result.passed, result.baseline_ms("compile"), result.candidate_ms)
