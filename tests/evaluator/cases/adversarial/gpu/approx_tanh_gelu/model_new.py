import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        ops.gelu_fast(x, out)
        return out
