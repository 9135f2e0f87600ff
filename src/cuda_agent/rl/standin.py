"""The stand-in scorer for runs on a machine without a GPU (the tiny end-to-end run and its tests).

It is NOT an evaluation: nothing is compiled or run. It exists so that every stage of the recipe can be exercised
end to end on a CPU. Rewards follow the paper's scale (-1 / 1 / 2 / 3) from visible features of the solution:
-1 if ``model_new.py`` is missing or does not define ``ModelNew``; 1 if it does; 2 if a ``.cu`` kernel file also
defines a ``__global__`` function and registers it with ``CA_EXPORT``; 3 if, in addition, the kernel uses shared
memory or vector loads. Every result says ``stand-in`` in its reason and notes, and trajectories record it.
"""
from __future__ import annotations

import re
from pathlib import Path

from cuda_agent.agent.backend import BuildSummary
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.tasks.task import Task

STAND_IN_NOTE = "stand-in scorer (no GPU): nothing was compiled or run; the reward is a made-up feature score"


def stand_in_score(files: dict[str, str]) -> float:
    """The stand-in reward of a solution given as ``{relative path: text}`` (see the module docstring)."""
    model_new = files.get("model_new.py", "")
    if not re.search(r"^class\s+ModelNew\b", model_new, re.MULTILINE):
        return -1.0
    kernels = "\n".join(text for path, text in files.items() if path.endswith(".cu"))
    if not ("__global__" in kernels and "CA_EXPORT(" in kernels):
        return 1.0
    if "__shared__" in kernels or re.search(r"\bfloat4\b|\bhalf2\b", kernels):
        return 3.0
    return 2.0


def score_single_file(solution: str) -> float:
    """The stand-in reward of a single-response solution (the warm-up stage writes one file holding
    ``ModelNew`` and its kernel source)."""
    return stand_in_score({"model_new.py": solution, "inline.cu": solution})


class StandInBackend:
    """An `EvalBackend` that reports the stand-in score; builds report OK without compiling."""

    verify_mode = "stand_in"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def build(self, workspace: Path) -> BuildSummary:
        return BuildSummary(ok=True, seconds=0.0, compiled=(), diagnostics="", log=STAND_IN_NOTE)

    def verify(self, task: Task, workspace: Path) -> EvalResult:
        return self._evaluate(task, workspace, "verify")

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> EvalResult:
        return self._evaluate(task, workspace, "profile")

    def close(self) -> None:
        """Nothing to release."""

    def _evaluate(self, task: Task, workspace: Path, kind: str) -> EvalResult:
        files = {p.relative_to(workspace).as_posix(): p.read_text(errors="replace")
                 for p in [workspace / "model_new.py", *sorted((workspace / "kernels").glob("*"))] if p.is_file()}
        reward = stand_in_score(files)
        correct = reward > 0
        speedup = {1.0: 0.9, 2.0: 1.01, 3.0: 1.2}.get(reward)
        stage = ("timed" if kind == "profile" else "correct") if correct else "incorrect"
        return EvalResult(task_id=task.id, stage=stage, correct=correct, reason=STAND_IN_NOTE, notes=("stand-in",),
                          speedup_eager=speedup, speedup_compile=speedup if kind == "profile" else None,
                          reward=int(reward))
