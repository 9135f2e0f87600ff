import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, GroupNorm, then the mean over features: zero up to rounding at the module's initialisation (each
    group's normalised values average to zero, and GroupNorm's weight is one and its bias zero), as in KernelBench
    L2/23; only other parameters give the output any signal."""

    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        return self.norm(self.linear(x)).mean(dim=1)


batch_size = 32
in_features = 64
out_features = 32
num_groups = 4


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
