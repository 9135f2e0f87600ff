"""Where `cuda-agent optimize` writes a run, and when a folder may take one.

A run folder holds one episode: its trajectory, ``result.json``, ``report.md``, the best kernel and the workspace.
Without ``--out`` a new folder is named after the task and the time (``runs/<task>-<YYYYmmdd-HHMMSS>``). A folder
that already holds a run is never written over: ``--resume`` continues the episode saved there, and anything else
is refused, so two runs never mix their files.
"""
from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.errors import ConfigError

# What a run writes into its folder; any of them there means the folder holds an earlier run.
RUN_FILES = ("trajectory.jsonl", "result.json", "report.md")


@dataclass(frozen=True)
class RunFolder:
    """The folder of one run and the paths inside it that the command needs before the episode starts."""

    root: Path

    @property
    def trajectory(self) -> Path:
        return self.root / "trajectory.jsonl"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"


def default_run_dir(task_id: str, now: _dt.datetime | None = None) -> Path:
    """``runs/<task id as a file name>-<time>``: a fresh folder per run, sortable by time."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", task_id).strip("_")
    return Path("runs") / f"{slug}-{(now or _dt.datetime.now()).strftime('%Y%m%d-%H%M%S')}"


def choose_run_folder(task_id: str, out: Path | None, *, resume: bool) -> RunFolder:
    """The run folder for a task: ``out``, or a new one under ``runs/``.

    Raises `ConfigError` when ``resume`` finds no trajectory to continue, or when the folder already holds a run
    and ``resume`` was not asked for (the message says which flag to use)."""
    folder = RunFolder(out or default_run_dir(task_id))
    if resume and not folder.trajectory.exists():
        raise ConfigError(f"--resume: no trajectory at {folder.trajectory}; pass the --out folder of the run to "
                          "continue")
    earlier = [name for name in RUN_FILES if (folder.root / name).exists()]
    if not resume and earlier:
        raise ConfigError(f"{folder.root} already holds a run ({', '.join(earlier)}); pass --resume to continue it, "
                          "or pick another --out folder")
    return folder
