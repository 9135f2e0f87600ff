import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """torch.sum(x, dim, keepdim=True) as one coalesced column-sum kernel."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        shape = list(x.shape)
        shape[dim] = 1
        out = torch.empty(shape, device=x.device, dtype=x.dtype)
        ops.sum_dim_forward(x, out, dim)
        return out
