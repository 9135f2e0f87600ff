"""Fixtures for pool tests."""
from __future__ import annotations

import pytest
from pool_helpers import TASK_CODE

from cuda_agent.tasks import Task


@pytest.fixture(scope="session")
def task() -> Task:
    return Task(id="test/relu", code=TASK_CODE, name="relu")
