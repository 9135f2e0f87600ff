"""`StepInfo`: what `AgentEnv.step` reports about one tool call besides the observation, as a typed value.

The environment keeps Gymnasium's five-tuple, ``(observation, reward, terminated, truncated, info)``; ``info`` is this
class rather than a dict, so the loop, the CLI's progress display and the RL adapters read fields, not string keys.
`to_dict` is its JSON form in trajectories (the file format; readers of old files see the same keys).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cuda_agent.agent.backend import BuildSummary
from cuda_agent.agent.best import BestKernel
from cuda_agent.evaluator.result import EvalResult


@dataclass(frozen=True)
class EpisodeEnd:
    """How the episode ended at this step. ``reason``: ``submitted``, ``fatal``, or the spent budget (``turns``,
    ``tokens``, ``wall``); ``reward_available`` is false when nothing could be checked (no GPU)."""

    reason: str
    fatal: str | None
    reward_available: bool
    final_reward: float


@dataclass(frozen=True)
class StepInfo:
    """One step's report. ``build`` and ``evaluations`` are what the tool call ran (a ``profile`` builds, then
    evaluates); ``best`` is the episode's best kernel so far and ``best_changed`` whether this step set it;
    ``end`` is set on the step that ended the episode."""

    turn: int
    tool: str
    error: str | None
    seconds: float
    elapsed_s: float
    tokens: int
    malformed: bool = False
    build: BuildSummary | None = None
    evaluations: tuple[EvalResult, ...] = ()
    best: BestKernel | None = None
    best_changed: bool = False
    end: EpisodeEnd | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """The trajectory's record of this step (the best kernel's files only on the step that set it)."""
        out: dict[str, Any] = {"turn": self.turn, "tool": self.tool, "ok": self.ok, "error": self.error,
                               "seconds": self.seconds, "elapsed_s": self.elapsed_s, "tokens": self.tokens}
        if self.malformed:
            out["malformed"] = True
        if self.build is not None:
            out["build"] = self.build.to_dict()
        if self.evaluations:
            out["evaluations"] = [result.to_dict() for result in self.evaluations]
        if self.best_changed:
            out["best_changed"] = True
        if self.best is not None:
            out["best"] = self.best.to_dict(with_files=self.best_changed)
        if self.end is not None:
            out.update(end_reason=self.end.reason, fatal=self.end.fatal, reward_available=self.end.reward_available,
                       final_reward=self.end.final_reward)
        return out
