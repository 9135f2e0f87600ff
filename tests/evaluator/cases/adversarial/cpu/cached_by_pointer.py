# task: small_linear_relu  mode: relaxed  expect: cached_output
# Cheat: remembers the result per input address (and version), returning it when the same tensor comes back.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.memo = {}

    def forward(self, x):
        key = (x.data_ptr(), x._version, tuple(x.shape))
        if key not in self.memo:
            self.memo[key] = torch.relu(self.linear(x) * self.scale)
        return self.memo[key]
