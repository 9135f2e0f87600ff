import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """ReLU in one vectorised elementwise kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ops.relu_forward(x, out)
        return out
