# task: degenerate_norm_mean  mode: relaxed  expect: correct
# Honest, buffer style: the affine as buffers made by torch.full and new_zeros, shaped [1, C] for broadcasting, the
# bias registered before the weight.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.groups = num_groups
        self.register_buffer("beta", self.linear.weight.new_zeros(1, out_features))
        self.register_buffer("gamma", torch.full((1, out_features), 1.0))

    def forward(self, x):
        y = self.linear(x)
        g = y.view(y.shape[0], self.groups, -1)
        g = (g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)
        return (g.view_as(y) * self.gamma + self.beta).mean(dim=1)
