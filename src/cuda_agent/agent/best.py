"""The best correct kernel of an episode: the highest speedup over torch.compile measured so far, with a snapshot
of its files taken when it was measured, so it survives whatever the agent does afterwards."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cuda_agent.agent.backend import Evaluation
from cuda_agent.evaluator.reward_schedule import discrete_reward


def paper_reward(evaluation: Evaluation) -> float:
    """The evaluator's reward; where it gave none (an evaluation written by hand or by an older run), the same
    schedule (`discrete_reward`) applied to the evaluation's speedups, so there is one reward rule, not two."""
    if evaluation.reward is not None:
        return evaluation.reward
    passed = bool(evaluation.correct) and not evaluation.rules_fired
    return float(discrete_reward(passed, evaluation.speedup_vs_eager, evaluation.speedup_vs_compile))


@dataclass(frozen=True)
class BestKernel:
    """A measured, correct solution: its evaluation, the turn it was measured at, and its files."""

    evaluation: Evaluation
    turn: int
    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def speedup_vs_compile(self) -> float:
        return float(self.evaluation.speedup_vs_compile or 0.0)

    @property
    def reward(self) -> float:
        return paper_reward(self.evaluation)

    def improves_on(self, other: "BestKernel | None") -> bool:
        return other is None or self.speedup_vs_compile > other.speedup_vs_compile

    def write(self, folder: Path) -> list[Path]:
        """Write the snapshot's files under ``folder`` (its relative layout kept); return the paths written."""
        written: list[Path] = []
        for rel, text in self.files.items():
            target = (folder / rel).resolve()
            if folder.resolve() not in target.parents:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, target)
            written.append(target)
        return written

    def to_dict(self, with_files: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"turn": self.turn, "evaluation": self.evaluation.to_dict()}
        if with_files:
            out["files"] = dict(self.files)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BestKernel":
        return cls(Evaluation.from_dict(data["evaluation"]), int(data["turn"]), dict(data.get("files", {})))


def is_candidate(evaluation: Evaluation) -> bool:
    """Only a correct, timed result can be the episode's best."""
    return bool(evaluation.correct) and evaluation.speedup_vs_compile is not None and not evaluation.rules_fired
