"""Fixtures for the RL tests: a tiny task, the byte tokenizer, a real `AgentEnv` factory with the stand-in evaluator."""
from __future__ import annotations

import pytest

from cuda_agent.rl.chat import ByteTokenizer
from cuda_agent.tasks.task import Task

from rl_samples import RELU  # noqa: E402


@pytest.fixture
def task() -> Task:
    return Task(id="user/relu", code=RELU, name="relu")


@pytest.fixture
def tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


@pytest.fixture
def env_settings(tmp_path):
    return {"env": {"sandbox": "local", "workspace_root": str(tmp_path / "ws")}, "backend": {"kind": "stand_in"}}
