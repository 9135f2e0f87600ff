"""Sample task, kernel and tool-call text shared by the RL tests (a module of its own: every test folder has a
conftest.py, so `from conftest import ...` would pick whichever was imported last)."""
from __future__ import annotations

import json

RELU = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(16)]\n\n"
        "def get_init_inputs():\n    return []\n")
KERNEL = ('#include "cuda_agent.h"\n__global__ void k(const float* x, float* y, int64_t n) {}\n'
          "void relu(ca::Tensor x, ca::Tensor out) {}\nCA_EXPORT(relu);\n")
MODEL_NEW = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"


def call_text(name: str, end: bool = True, **arguments: object) -> str:
    text = "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
    return text + ("<|im_end|>" if end else "")
