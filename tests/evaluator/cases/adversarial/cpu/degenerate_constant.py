# task: degenerate_norm_mean  mode: relaxed  expect: rejected  native: no
# route: degenerate
# Cheat: the task's output is zero up to rounding at its module's initialisation (GroupNorm with unit weight and zero
# bias, then a mean), so zeros pass any tolerance there. The judge notices the degenerate initialisation and checks
# with perturbed parameters (the same in ModelNew, built under the same seed), where the output carries signal.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        return torch.zeros(x.shape[0])
