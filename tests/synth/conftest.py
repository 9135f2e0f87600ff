"""Fixtures for synthesis tests: a small, really crawled catalog (a full crawl takes a minute on a small CPU)."""
from __future__ import annotations

from pathlib import Path

import pytest

SMALL_OPS = (
    "nn.Conv2d", "nn.Linear", "nn.ReLU", "nn.GELU", "nn.LayerNorm", "nn.BatchNorm2d", "nn.MaxPool2d", "nn.Dropout",
    "torch.tanh", "torch.sigmoid", "torch.log", "torch.sum", "torch.mul", "torch.softmax", "torch.positive",
    "F.gelu", "F.silu",
)


@pytest.fixture(scope="session")
def small_catalog():
    from cuda_agent.synth.crawl import crawl_operators

    return crawl_operators(include_transformers=False, only=set(SMALL_OPS))


@pytest.fixture(scope="session")
def small_catalog_file(small_catalog, tmp_path_factory) -> Path:
    return small_catalog.save(tmp_path_factory.mktemp("catalog") / "catalog.json")


def task_code(forward: str, *, init: str = "", shape: str = "batch_size, dim", batch: int = 4, dim: int = 64,
              extra: str = "") -> str:
    """A KernelBench-format task whose forward body is ``forward`` (one or more lines, 8-space indented)."""
    return (
        "import torch\nimport torch.nn as nn\nimport random\n" + extra + "\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        + (init or "") +
        "\n    def forward(self, x):\n"
        + forward + "\n\n"
        f"batch_size = {batch}\ndim = {dim}\n\n"
        f"def get_inputs():\n    return [torch.randn({shape})]\n\n"
        "def get_init_inputs():\n    return []\n"
    )


@pytest.fixture
def make_task():
    """`task_code`, as a fixture (test files cannot import each other without package files)."""
    return task_code
