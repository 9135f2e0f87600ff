"""`TaskOutcome`: what a benchmark keeps about one task (its best kernel), and how it is read from an evaluation.

An outcome is the unit every metric, report and results file works on. It is deliberately small and plain (numbers,
strings, paths) so that outcomes from our evaluator, from a stored JSON file or from another system's results are all
scored by the same code.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from cuda_agent.errors import ConfigError
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.evaluator.reward_schedule import REWARD_INCORRECT

_LEVEL_PREFIX = re.compile(r"^L(\d+)[/_]")


@dataclass(frozen=True)
class TaskOutcome:
    """The best result of one task in a benchmark run.

    Attributes:
        task_id: the task's id (``L1/19_ReLU``).
        level: KernelBench level where known; metrics are grouped by it.
        correct: the kernel passed verification (and no anti-cheat rule fired).
        speedup_vs_eager: eager time / candidate time; None when not timed.
        speedup_vs_compile: torch.compile time / candidate time; None when not timed.
        eager_ms, compile_ms, candidate_ms: median times in milliseconds, where known.
        stage: the furthest stage reached (``built``, ``correct``, ``timed``, or a failure stage).
        rules_fired: names of anti-cheat rules that fired.
        reward: the reward the evaluator gave, where known.
        solution: path of the kept kernel (a workspace folder or a single-file solution), relative to the run folder
            when it lies inside it.
        trajectory: path of the episode's trajectory (JSON), where there was an episode.
        error: a short reason when the task failed before any result (build error, crash, timeout).
    """

    task_id: str
    level: int | None = None
    correct: bool = False
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    candidate_ms: float | None = None
    stage: str = ""
    rules_fired: tuple[str, ...] = ()
    reward: float | None = None
    solution: str | None = None
    trajectory: str | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in ("speedup_vs_eager", "speedup_vs_compile"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise ConfigError(f"task {self.task_id}: {name} must be a positive finite number, got {value!r}")

    def rank_key(self) -> tuple[int, float, float]:
        """Sort key of "better": correct first, then faster than compile, then faster than eager."""
        return (
            1 if self.correct else 0,
            self.speedup_vs_compile if self.correct and self.speedup_vs_compile is not None else 0.0,
            self.speedup_vs_eager if self.correct and self.speedup_vs_eager is not None else 0.0,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "task_id": self.task_id,
            "level": self.level,
            "correct": self.correct,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "eager_ms": self.eager_ms,
            "compile_ms": self.compile_ms,
            "candidate_ms": self.candidate_ms,
            "stage": self.stage,
            "rules_fired": list(self.rules_fired),
            "reward": self.reward,
            "solution": self.solution,
            "trajectory": self.trajectory,
            "error": self.error,
        }
        if self.extra:
            data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TaskOutcome":
        """Read an outcome written by `to_dict`; raise `ConfigError` naming the missing or bad field."""
        if "task_id" not in data:
            raise ConfigError(f"outcome record has no 'task_id' (keys: {', '.join(sorted(data))})")
        try:
            return cls(
                task_id=str(data["task_id"]),
                level=_opt_int(data.get("level")),
                correct=bool(data.get("correct", False)),
                speedup_vs_eager=_opt_float(data.get("speedup_vs_eager")),
                speedup_vs_compile=_opt_float(data.get("speedup_vs_compile")),
                eager_ms=_opt_float(data.get("eager_ms")),
                compile_ms=_opt_float(data.get("compile_ms")),
                candidate_ms=_opt_float(data.get("candidate_ms")),
                stage=str(data.get("stage") or ""),
                rules_fired=tuple(str(r) for r in data.get("rules_fired") or ()),
                reward=_opt_float(data.get("reward")),
                solution=data.get("solution"),
                trajectory=data.get("trajectory"),
                error=str(data.get("error") or ""),
                extra=dict(data.get("extra") or {}),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"outcome record for {data.get('task_id')!r} is malformed: {exc}") from exc

    @classmethod
    def from_result(cls, result: EvalResult, level: int | None = None, *, task_id: str | None = None,
                    solution: str | None = None, trajectory: str | None = None,
                    extra: Mapping[str, Any] | None = None) -> "TaskOutcome":
        """The outcome the evaluator's `EvalResult` says: the one way a verdict becomes an outcome, for an agent
        run's best kernel and for offline scoring alike (a stored or transmitted result: `EvalResult.from_dict` it
        first).

        Correct means `EvalResult.passed` (a correct stage and no rule fired), the same test the reward makes;
        speedups and times are the evaluator's, the baselines scaled by its drift (so eager_ms / candidate_ms is the
        speedup); the reward is the one the evaluator's schedule gave. Raises `ConfigError` when no task id is known.
        """
        tid = task_id or result.task_id
        if not tid:
            raise ConfigError("evaluation result has no task_id; pass task_id=")
        correct = result.passed

        def speed(value: float | None) -> float | None:
            return value if correct and value is not None and math.isfinite(value) and value > 0 else None

        return cls(
            task_id=tid,
            level=level if level is not None else level_of(tid),
            correct=correct,
            speedup_vs_eager=speed(result.speedup_eager),
            speedup_vs_compile=speed(result.speedup_compile),
            eager_ms=result.baseline_ms("eager"),
            compile_ms=result.baseline_ms("compile"),
            candidate_ms=result.candidate_ms,
            stage=result.stage,
            rules_fired=result.rule_names,
            reward=float(result.reward),
            solution=solution,
            trajectory=trajectory,
            error="" if correct else result.reason[:500],
            extra=dict(extra or {}),
        )


def _opt_float(value: Any) -> float | None:
    if value is None:
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def level_of(task_id: str) -> int | None:
    """The level encoded in a KernelBench-style id (``L2/12_Gemm...`` or ``L2_12_Gemm...``), else None."""
    match = _LEVEL_PREFIX.match(task_id)
    return int(match.group(1)) if match else None


def failed(task_id: str, level: int | None, reason: str, stage: str = "error", *,
           trajectory: str | None = None) -> TaskOutcome:
    """An outcome for a task that produced no usable result: incorrect, with the schedule's reward for that."""
    return TaskOutcome(task_id=task_id, level=level, correct=False, stage=stage, error=reason,
                       reward=float(REWARD_INCORRECT), trajectory=trajectory)


def best_per_task(outcomes: Iterable[TaskOutcome]) -> dict[str, TaskOutcome]:
    """Keep the best outcome of each task (see `TaskOutcome.rank_key`); ties keep the first seen."""
    best: dict[str, TaskOutcome] = {}
    for outcome in outcomes:
        current = best.get(outcome.task_id)
        if current is None or outcome.rank_key() > current.rank_key():
            best[outcome.task_id] = outcome
    return best

