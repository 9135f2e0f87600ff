import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=bias)
        self.subtract = nn.Parameter(torch.randn(out_features))  # drawn after the Linear, as in the reference
        with torch.no_grad():
            colmean = self.gemm.weight.double().mean(dim=0)
            shift = -self.subtract.double().mean()
            if self.gemm.bias is not None:
                shift = shift + self.gemm.bias.double().mean()
        self.register_buffer("w_colmean", colmean.float().contiguous())
        self.register_buffer("shift", shift.float().reshape(1))

    def forward(self, x):
        out = torch.empty_like(x)
        ops.residual_gelu_of_rowdot(x, self.w_colmean, self.shift, out)
        return out
