"""Fixtures for the evaluator's tests: one warm fork-server worker per session."""
from __future__ import annotations

from typing import Iterator

import pytest

from cuda_agent.evaluator import WarmWorker


@pytest.fixture(scope="session")
def warm_worker() -> Iterator[WarmWorker]:
    with WarmWorker() as worker:
        yield worker
