import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """cuBLAS SGEMM, then bias + (y * s + y) fused into one epilogue kernel."""

    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)  # holds weight and bias (names as in Model)
        self.scaling_factor = float(scaling_factor)

    def forward(self, x):
        out = torch.empty((x.shape[0], self.matmul.weight.shape[0]), device=x.device, dtype=x.dtype)
        ops.matmul_scale_residual(x, self.matmul.weight, self.matmul.bias, out, self.scaling_factor)
        return out
