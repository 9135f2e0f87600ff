# task: tanh_gelu  mode: relaxed  expect: correct
# Honest: the tanh GELU rewritten as x * sigmoid(2v) = x / (1 + exp(-2v)), as fused kernels often write it (one
# exponential, no tanh): a few fp32 units from the float64 result, inside the elementwise floor of 64.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        v = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return x / (1.0 + torch.exp(-2.0 * v))
