import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """minGPT's tanh GELU (KernelBench L1/88) at a CPU test's size: elementwise, so its precision floor is the
    contract's smallest (64 fp32 units, `judge.depth`)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


batch_size = 64
dim = 4096


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
