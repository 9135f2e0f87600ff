"""`cuda-agent optimize`'s run-folder policy: a fresh folder per run, never a run written over another."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from cuda_agent.cli.run_folder import RUN_FILES, choose_run_folder, default_run_dir
from cuda_agent.errors import ConfigError


def test_the_default_folder_is_named_after_the_task_and_the_time() -> None:
    when = dt.datetime(2026, 12, 3, 11, 5, 9)
    assert default_run_dir("L1/19_ReLU (fast)", when) == Path("runs") / "L1_19_ReLU_fast-20261203-110509"


def test_a_folder_holding_a_run_needs_resume_and_resume_needs_a_trajectory(tmp_path: Path) -> None:
    fresh = choose_run_folder("t", tmp_path / "new", resume=False)
    assert fresh.trajectory == tmp_path / "new" / "trajectory.jsonl" and fresh.workspace.name == "workspace"
    with pytest.raises(ConfigError, match="no trajectory"):
        choose_run_folder("t", tmp_path / "new", resume=True)
    for name in RUN_FILES:
        held = tmp_path / name.replace(".", "_")
        held.mkdir()
        (held / name).write_text("{}")
        with pytest.raises(ConfigError, match=f"already holds a run \\({name}\\).*--resume"):
            choose_run_folder("t", held, resume=False)
    (tmp_path / "trajectory_jsonl" / "report.md").write_text("")
    assert choose_run_folder("t", tmp_path / "trajectory_jsonl", resume=True).root == tmp_path / "trajectory_jsonl"
