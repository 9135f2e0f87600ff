import torch
import torch.nn as nn


def _fused(x):
    return x * torch.sigmoid(x) + 0.5 * x * x


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fused = torch.compile(_fused)

    def forward(self, x):
        return self.fused(x)
