import torch
import torch.nn as nn
from binding import ops


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], 1, device=x.device, dtype=x.dtype)
        ops.row_sum(x, out)
        return out
