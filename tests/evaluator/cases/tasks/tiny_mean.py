import torch
import torch.nn as nn


class Model(nn.Module):
    """Row means of small values: every output is far below the default atol of 1e-2."""

    def forward(self, x):
        return x.mean(dim=1)


batch_size = 32
dim = 512


def get_inputs():
    return [torch.randn(batch_size, dim) * 1e-3]


def get_init_inputs():
    return []
