"""Fixtures for the RL tests: a tiny task, the byte tokenizer, a real `AgentEnv` factory with the stand-in scorer."""
from __future__ import annotations

import json

import pytest

from cuda_agent.rl.chat import ByteTokenizer
from cuda_agent.tasks.task import Task

RELU = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(16)]\n\n"
        "def get_init_inputs():\n    return []\n")
KERNEL = ('#include "cuda_agent.h"\n__global__ void k(const float* x, float* y, int64_t n) {}\n'
          "void relu(ca::Tensor x, ca::Tensor out) {}\nCA_EXPORT(relu);\n")
MODEL_NEW = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"


def call_text(name: str, end: bool = True, **arguments: object) -> str:
    text = "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
    return text + ("<|im_end|>" if end else "")


@pytest.fixture
def task() -> Task:
    return Task(id="user/relu", code=RELU, name="relu")


@pytest.fixture
def tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


@pytest.fixture
def env_settings(tmp_path):
    return {"env": {"sandbox": "local", "workspace_root": str(tmp_path / "ws")}, "backend": {"kind": "stand_in"}}
