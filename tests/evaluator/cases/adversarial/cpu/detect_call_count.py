# task: small_linear_relu  mode: relaxed  expect: rejected  native: no
# route: detection
# Cheat: an evaluator checks its first few calls and only times the rest; this candidate computes honestly for six
# calls and returns a wrong answer from then on. Every call is checked, the last as much as the first.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 6:
            return x[:, : self.linear.out_features].clone()
        return torch.relu(self.linear(x) * self.scale)
