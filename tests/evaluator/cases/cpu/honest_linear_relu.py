# task: small_linear_relu  mode: relaxed  expect: correct
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return torch.clamp_min(y * self.scale, 0.0)
