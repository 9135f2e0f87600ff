import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = float(divisor)
        # Fold the divisor into the layer (exact for a power of two, within an ulp otherwise). ReLU commutes with a
        # positive scale only, so a non-positive divisor stays in the epilogue.
        self.post_divisor = 1.0
        with torch.no_grad():
            if self.divisor > 0:
                self.linear.weight.div_(self.divisor)
                self.linear.bias.div_(self.divisor)
            else:
                self.post_divisor = self.divisor

    def forward(self, x):
        out = torch.empty((x.shape[0], self.linear.out_features), device=x.device, dtype=x.dtype)
        ops.linear_relu_div(x, self.linear.weight, self.linear.bias, out, self.post_divisor)
        return out
