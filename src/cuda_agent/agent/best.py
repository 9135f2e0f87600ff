"""The best correct kernel of an episode: the highest speedup over torch.compile measured so far, with a snapshot
of its files taken when it was measured, so it survives whatever the agent does afterwards."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cuda_agent.evaluator.result import EvalResult


@dataclass(frozen=True)
class BestKernel:
    """A measured, correct solution: the evaluator's result, the turn it was measured at, and its files.

    Its reward is the result's own (the reward schedule's, applied by whoever judged it), never recomputed here."""

    result: EvalResult
    turn: int
    files: Mapping[str, str] = field(default_factory=dict)

    @property
    def speedup_vs_compile(self) -> float:
        return float(self.result.speedup_compile or 0.0)

    @property
    def reward(self) -> float:
        return float(self.result.reward)

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
        out: dict[str, Any] = {"turn": self.turn, "result": self.result.to_dict()}
        if with_files:
            out["files"] = dict(self.files)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BestKernel":
        return cls(EvalResult.from_dict(data["result"]), int(data["turn"]), dict(data.get("files", {})))


def is_candidate(result: EvalResult) -> bool:
    """Only a passed (correct, no rule fired), timed result can be the episode's best."""
    return result.passed and result.speedup_compile is not None
