"""What every stage reads and writes, whichever engine runs it: its task list, its output folder, its result.

Kept apart from `cuda_agent.rl.stages` (which dispatches to the engines) so the engines' modules can use them without
importing the dispatcher that imports them: the rl package has no import cycle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_agent.rl.config import CollectConfig, RolloutStage, StageConfig

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``."""


@dataclass(frozen=True)
class StageResult:
    """What a stage did: its outputs and metrics (steps, losses, rewards), and the command it launched."""

    stage: str
    engine: str
    out_dir: Path
    metrics: dict[str, float] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    returncode: int | None = None


def out_dir_of(cfg: StageConfig) -> Path:
    return Path(cfg.output_dir or f"runs/rl/{cfg.stage}")


def load_task_list(cfg: RolloutStage | CollectConfig) -> list[Any]:
    """The stage's ``tasks``, the first ``max_tasks`` of them when that is set."""
    from cuda_agent.tasks import load_tasks

    tasks = list(load_tasks(cfg.tasks))
    return tasks[: cfg.max_tasks] if cfg.max_tasks else tasks
