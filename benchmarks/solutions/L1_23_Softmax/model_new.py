import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """Softmax over dim 1: one block per row, online max/sum, then one normalising pass."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ops.softmax_forward(x, out)
        return out
