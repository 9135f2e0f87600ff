"""Fixtures for pool tests."""
from __future__ import annotations

import pytest
from helpers import RELU_TASK

from cuda_agent.tasks import Task


@pytest.fixture(scope="session")
def task() -> Task:
    return Task(id="test/relu", code=RELU_TASK, name="relu")
