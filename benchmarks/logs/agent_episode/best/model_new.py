import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        ops.scaled_silu(x, out, self.scale)
        return out
