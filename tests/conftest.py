"""Suite-wide test policy: `gpu` tests skip without CUDA; `api` tests skip unless CUDA_AGENT_API_TESTS=1."""
from __future__ import annotations

import os

import pytest

from cuda_agent.testing import cuda_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_gpu = cuda_available()
    run_api = os.environ.get("CUDA_AGENT_API_TESTS") == "1"
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "api" in item.keywords and not run_api:
            item.add_marker(pytest.mark.skip(reason="talks to a real model endpoint; set CUDA_AGENT_API_TESTS=1"))
