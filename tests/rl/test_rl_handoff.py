"""Checkpoint hand-off: the newest global_step_N, and verl's model merger turning it into the next stage's folder."""
from __future__ import annotations

import sys

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.rl.handoff import latest_step, merge_commands


def test_latest_step_follows_verls_tracker_then_the_highest_step(tmp_path):
    ckpt = tmp_path / "checkpoints"
    for n in (2, 10, 9):
        (ckpt / f"global_step_{n}" / "actor").mkdir(parents=True)
    assert latest_step(ckpt).name == "global_step_10"  # numeric, not lexical
    (ckpt / "latest_checkpointed_iteration.txt").write_text("9\n")
    assert latest_step(ckpt).name == "global_step_9"
    with pytest.raises(ConfigError, match="no global_step_N checkpoint"):
        latest_step(tmp_path / "empty")


def test_merge_commands_name_each_stages_roles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for role in ("actor", "critic"):
        (tmp_path / "runs/ppo/checkpoints/global_step_3" / role).mkdir(parents=True)
    commands = merge_commands("ppo", tmp_path / "runs" / "ppo")
    assert [c[:6] for c in commands] == [[sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]] * 2
    assert [(c[7], c[9]) for c in commands] == [
        (str(tmp_path / "runs/ppo/checkpoints/global_step_3/actor"), str(tmp_path / "runs/ppo/actor")),
        (str(tmp_path / "runs/ppo/checkpoints/global_step_3/critic"), str(tmp_path / "runs/ppo/critic"))]
    (tmp_path / "runs/rft/checkpoints/global_step_1").mkdir(parents=True)
    assert merge_commands("rft", tmp_path / "runs/rft")[0][7] == str(tmp_path / "runs/rft/checkpoints/global_step_1")
    with pytest.raises(ConfigError, match="has no critic shards"):
        (tmp_path / "runs/critic/checkpoints/global_step_1/actor").mkdir(parents=True)
        merge_commands("critic", tmp_path / "runs/critic")
