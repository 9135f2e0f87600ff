import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # drawn after the Linear, as in the reference

    def forward(self, x):
        y = torch.empty((x.shape[0], self.gemm.out_features), device=x.device, dtype=x.dtype)
        ops.matmul(x, self.gemm.weight, y)
        ops.add_relu_(y, self.bias)
        return y
