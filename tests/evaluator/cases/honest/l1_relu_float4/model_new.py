import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """torch.relu(x) in one memory pass of our own kernels."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ops.relu(x, out)
        return out
