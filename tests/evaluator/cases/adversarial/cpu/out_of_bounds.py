# task: small_linear_relu  mode: relaxed  expect: out_of_bounds_write
# Cheat (or bug): writes past the end of its output (a kernel with a missing bounds check, simulated on CPU).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        out.copy_(torch.relu(self.linear(x) * self.scale))
        past_end = out.as_strided((out.numel() + 64,), (1,))
        past_end[out.numel():] = 0.0
        return out
