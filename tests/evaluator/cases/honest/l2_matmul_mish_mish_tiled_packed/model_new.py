import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        # Pack W^T (in_features x out_features, row-major) once: the GEMM's B tiles then load along contiguous rows.
        with torch.no_grad():
            self.register_buffer("weight_t", self.linear.weight.t().contiguous())

    def forward(self, x):
        out = torch.empty((x.shape[0], self.weight_t.shape[1]), device=x.device, dtype=x.dtype)
        ops.linear_mish_mish(x, self.weight_t, self.linear.bias, out)
        return out
