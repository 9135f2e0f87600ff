import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """cuBLAS SGEMM, then bias + Mish + Mish fused into one epilogue kernel."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # holds weight and bias (names as in Model)

    def forward(self, x):
        out = torch.empty((x.shape[0], self.linear.weight.shape[0]), device=x.device, dtype=x.dtype)
        ops.matmul_mish_mish(x, self.linear.weight, self.linear.bias, out)
        return out
