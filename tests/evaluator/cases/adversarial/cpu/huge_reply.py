# task: small_linear_relu  mode: relaxed  expect: rejected  native: no
# route: resources
# Cheat: returns the output together with four million Python numbers, so the runner's reply (which describes every
# returned value) grows past any sane size, hoping to stall or crash the judge's reader. The wire refuses messages
# over 64 MiB on either side; the judge gets an error or a crash, never a verdict from a half-read message.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return (torch.relu(self.linear(x) * self.scale), *([1.0e300] * 4_000_000))
