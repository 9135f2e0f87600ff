import torch
import torch.nn as nn
from binding import ops


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        ops.matmul(a, b, out)
        return out
