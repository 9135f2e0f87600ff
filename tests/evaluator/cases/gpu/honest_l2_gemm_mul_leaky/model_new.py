import torch
import torch.nn as nn
from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = float(multiplier)
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], self.gemm.out_features, device=x.device, dtype=x.dtype)
        ops.gemm_mul_leaky(x, self.gemm.weight, self.gemm.bias, out, self.multiplier, self.negative_slope)
        return out
