import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        dim = self.dim % x.dim()
        if dim != x.dim() - 1:
            raise ValueError("this kernel scans along the last dimension")
        out = torch.empty_like(x)
        ops.cumsum_last_dim(x, out)
        return out
