"""Fixtures for the bench tests: a few real KernelBench tasks (skipped when the data is absent)."""
from __future__ import annotations

import pytest

from cuda_agent.tasks import TaskSet, load_kernelbench_dir
from cuda_agent.locations import kernelbench_root

SOLVED = ["L1/19_ReLU", "L1/23_Softmax", "L2/12_Gemm_Multiply_LeakyReLU", "L3/1_MLP"]


@pytest.fixture(scope="session")
def kb_tasks() -> TaskSet:
    root = kernelbench_root()
    if root is None:
        pytest.skip("KernelBench tasks not found (set CUDA_AGENT_KERNELBENCH)")
    tasks = load_kernelbench_dir(root, validate=False)
    return tasks.filter(ids=SOLVED + ["L1/20_LeakyReLU"])
