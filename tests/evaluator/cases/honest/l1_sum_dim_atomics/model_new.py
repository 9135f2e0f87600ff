import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        shape = list(x.shape)
        shape[dim] = 1
        out = torch.zeros(shape, device=x.device, dtype=x.dtype)  # the kernel accumulates into it atomically
        ops.sum_dim_keepdim(x, out, dim)
        return out
