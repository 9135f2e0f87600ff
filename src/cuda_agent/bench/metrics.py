"""The paper's and KernelBench's metrics, per level and overall.

Definitions (sources in README.md):

- pass rate: correct tasks / tasks. With a task list, tasks without an outcome count as failures.
- faster-than-X rate: tasks that are correct AND have speedup_vs_X > threshold (strictly; default 1.05, "more than 5%
  faster" as in the reward), over ALL tasks (not only correct ones), as in the paper's Table 1 where every faster
  rate is at most the pass rate and the overall row is the problem-weighted mean of the level rows.
- geometric-mean speedup vs X: over correct tasks that were timed (KernelBench's
  ``geometric_mean_speed_ratio_correct_only``); None where no task qualifies. The overall value follows the paper's
  footnote: the per-level geomeans weighted by the number of problems in each level. The pooled geomean over all
  correct tasks is reported beside it.
- fast_p (KernelBench): tasks that are correct AND have speedup > p (strictly), over all tasks.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from cuda_agent.bench.outcome import TaskOutcome, best_per_task, level_of
from cuda_agent.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_FAST_P = (0.0, 0.5, 0.8, 1.0, 1.05, 1.25, 1.5, 2.0, 3.0, 5.0)


@dataclass(frozen=True)
class MetricsConfig:
    """How outcomes are scored."""

    faster_threshold: float = 1.05
    """A task is "faster" when correct and its speedup is strictly above this (1.05: more than 5% faster)."""
    fast_p: tuple[float, ...] = DEFAULT_FAST_P
    """Thresholds p at which KernelBench's fast_p is reported."""

    def __post_init__(self) -> None:
        if not math.isfinite(self.faster_threshold) or self.faster_threshold <= 0:
            raise ConfigError(f"faster_threshold must be a positive number, got {self.faster_threshold!r}")
        if any(not math.isfinite(p) or p < 0 for p in self.fast_p):
            raise ConfigError(f"fast_p thresholds must be finite and >= 0, got {self.fast_p!r}")


@dataclass(frozen=True)
class GroupMetrics:
    """Metrics of one level (or of all tasks)."""

    name: str
    level: int | None
    tasks: int
    attempted: int
    correct: int
    pass_rate: float
    faster_than_eager_rate: float
    faster_than_compile_rate: float
    geomean_speedup_vs_eager: float | None
    geomean_speedup_vs_compile: float | None
    fast_p_vs_eager: dict[float, float] = field(default_factory=dict)
    fast_p_vs_compile: dict[float, float] = field(default_factory=dict)

    @property
    def missing(self) -> int:
        return self.tasks - self.attempted

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "tasks": self.tasks,
            "attempted": self.attempted,
            "missing": self.missing,
            "correct": self.correct,
            "pass_rate": self.pass_rate,
            "faster_than_eager_rate": self.faster_than_eager_rate,
            "faster_than_compile_rate": self.faster_than_compile_rate,
            "geomean_speedup_vs_eager": self.geomean_speedup_vs_eager,
            "geomean_speedup_vs_compile": self.geomean_speedup_vs_compile,
            "fast_p_vs_eager": {str(p): v for p, v in self.fast_p_vs_eager.items()},
            "fast_p_vs_compile": {str(p): v for p, v in self.fast_p_vs_compile.items()},
        }


@dataclass(frozen=True)
class BenchMetrics:
    """Per-level metrics, the overall row, and the settings they were computed with."""

    levels: tuple[GroupMetrics, ...]
    overall: GroupMetrics
    pooled_geomean_speedup_vs_eager: float | None
    pooled_geomean_speedup_vs_compile: float | None
    config: MetricsConfig

    def level(self, level: int | None) -> GroupMetrics:
        for group in self.levels:
            if group.level == level:
                return group
        raise KeyError(f"no tasks of level {level} in these metrics")

    def to_dict(self) -> dict[str, Any]:
        return {
            "faster_threshold": self.config.faster_threshold,
            "fast_p_thresholds": list(self.config.fast_p),
            "overall": self.overall.to_dict(),
            "levels": [g.to_dict() for g in self.levels],
            "pooled_geomean_speedup_vs_eager": self.pooled_geomean_speedup_vs_eager,
            "pooled_geomean_speedup_vs_compile": self.pooled_geomean_speedup_vs_compile,
        }


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive numbers; None for an empty sequence."""
    if not values:
        return None
    if any(v <= 0 or not math.isfinite(v) for v in values):
        raise ConfigError(f"geometric mean needs positive finite values, got {list(values)!r}")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def fast_p(outcomes: Sequence[TaskOutcome], n_tasks: int, p: float, *, versus: str = "compile") -> float:
    """KernelBench's fast_p: tasks correct AND with speedup strictly above ``p``, divided by ``n_tasks``."""
    if n_tasks <= 0:
        return 0.0
    return sum(1 for o in outcomes if _is_faster(o, p, versus)) / n_tasks


def _speedup(outcome: TaskOutcome, versus: str) -> float | None:
    if versus == "compile":
        return outcome.speedup_vs_compile
    if versus == "eager":
        return outcome.speedup_vs_eager
    raise ConfigError(f"versus must be 'eager' or 'compile', got {versus!r}")


def _is_faster(outcome: TaskOutcome, threshold: float, versus: str) -> bool:
    speedup = _speedup(outcome, versus)
    return outcome.correct and speedup is not None and speedup > threshold


def _group(name: str, level: int | None, outcomes: Sequence[TaskOutcome], n_tasks: int,
           config: MetricsConfig) -> GroupMetrics:
    def rate(count: int) -> float:
        return count / n_tasks if n_tasks else 0.0

    correct = [o for o in outcomes if o.correct]
    return GroupMetrics(
        name=name,
        level=level,
        tasks=n_tasks,
        attempted=len(outcomes),
        correct=len(correct),
        pass_rate=rate(len(correct)),
        faster_than_eager_rate=rate(sum(_is_faster(o, config.faster_threshold, "eager") for o in outcomes)),
        faster_than_compile_rate=rate(sum(_is_faster(o, config.faster_threshold, "compile") for o in outcomes)),
        geomean_speedup_vs_eager=geomean([o.speedup_vs_eager for o in correct if o.speedup_vs_eager is not None]),
        geomean_speedup_vs_compile=geomean(
            [o.speedup_vs_compile for o in correct if o.speedup_vs_compile is not None]
        ),
        fast_p_vs_eager={p: fast_p(outcomes, n_tasks, p, versus="eager") for p in config.fast_p},
        fast_p_vs_compile={p: fast_p(outcomes, n_tasks, p, versus="compile") for p in config.fast_p},
    )


def _weighted_geomean(groups: Sequence[GroupMetrics], attr: str) -> float | None:
    pairs = [(g.tasks, getattr(g, attr)) for g in groups if getattr(g, attr) is not None and g.tasks > 0]
    if not pairs:
        return None
    total = sum(n for n, _ in pairs)
    return math.exp(math.fsum(n * math.log(v) for n, v in pairs) / total)


def level_name(level: int | None) -> str:
    return f"Level {level}" if level is not None else "No level"


def compute_metrics(
    outcomes: Iterable[TaskOutcome],
    expected: Mapping[str, int | None] | None = None,
    config: MetricsConfig | None = None,
) -> BenchMetrics:
    """Score outcomes per level and overall.

    Args:
        outcomes: results, at most one per task is used (the best, by `TaskOutcome.rank_key`).
        expected: the task list, ``task id -> level``. Tasks in it without an outcome count as failures; outcomes of
            tasks not in it are left out (with a warning). Without it, the attempted tasks are the denominator.
        config: thresholds.

    Raises:
        ConfigError: when a threshold is invalid or a speedup is not a positive number.
    """
    config = config or MetricsConfig()
    best = best_per_task(outcomes)
    if expected is None:
        expected = {tid: (o.level if o.level is not None else level_of(tid)) for tid, o in best.items()}
    else:
        extra = sorted(set(best) - set(expected))
        if extra:
            log.warning("%d outcomes are for tasks outside the task list and are left out: %s", len(extra),
                        ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else ""))
        best = {tid: o for tid, o in best.items() if tid in expected}

    by_level: dict[int | None, list[str]] = {}
    for tid, level in expected.items():
        by_level.setdefault(level, []).append(tid)
    order = sorted(by_level, key=lambda lv: (lv is None, lv if lv is not None else 0))
    groups = tuple(
        _group(level_name(lv), lv, [best[t] for t in by_level[lv] if t in best], len(by_level[lv]), config)
        for lv in order
    )
    all_outcomes = list(best.values())
    overall = _group("Overall", None, all_outcomes, len(expected), config)
    pooled_eager, pooled_compile = overall.geomean_speedup_vs_eager, overall.geomean_speedup_vs_compile
    if len(groups) > 1:
        overall = replace(
            overall,
            geomean_speedup_vs_eager=_weighted_geomean(groups, "geomean_speedup_vs_eager"),
            geomean_speedup_vs_compile=_weighted_geomean(groups, "geomean_speedup_vs_compile"),
        )
    return BenchMetrics(groups, overall, pooled_eager, pooled_compile, config)
