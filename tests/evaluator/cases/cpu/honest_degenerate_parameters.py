# task: degenerate_norm_mean  mode: relaxed  expect: correct
# Honest, parameter style: GroupNorm's affine made as nn.Parameter(torch.ones/zeros), computed by hand (the judge
# perturbs constants however they are made, so these get the reference's perturbed values).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.groups = num_groups
        self.gamma = nn.Parameter(torch.ones(out_features))
        self.beta = nn.Parameter(torch.zeros(out_features))

    def forward(self, x):
        y = self.linear(x)
        g = y.view(y.shape[0], self.groups, -1)
        g = (g - g.mean(-1, keepdim=True)) / torch.sqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)
        return (g.view_as(y) * self.gamma + self.beta).mean(dim=1)
