import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j; the later max/mean/logsumexp over dim 1 see one value."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same layer, same seed: the reference's weights
        with torch.no_grad():
            colsum = self.linear.weight.double().sum(dim=0).float()
            bias_sum = self.linear.bias.double().sum().float().reshape(1)
        self.register_buffer("w_colsum", colsum)
        self.register_buffer("b_sum", bias_sum)

    def forward(self, x):
        out = torch.empty((x.shape[0], 1), device=x.device, dtype=x.dtype)
        ops.rowdot_plus_scalar(x, self.w_colsum, self.b_sum, out)
        return out
