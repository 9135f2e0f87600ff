import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        sum_sq = torch.zeros(1, device=x.device, dtype=torch.float64)  # accumulator for pass 1
        ops.frobenius_normalize(x, out, sum_sq)
        return out
