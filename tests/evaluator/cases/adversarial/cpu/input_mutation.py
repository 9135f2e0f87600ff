# task: small_linear_relu  mode: relaxed  expect: input_mutation  native: no
# route: memory
# Cheat: computes in place in its input, saving an allocation (and corrupting the buffer the judge filled, which
# it compares with its own copy after every call).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = torch.relu(self.linear(x) * self.scale)
        x.zero_()
        return y
