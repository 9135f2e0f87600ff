# task: small_linear_relu  mode: relaxed  expect: timeout
# Not a cheat: a forward that never returns (an endless kernel). The evaluation must be killed at its limit.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()

    def forward(self, x):
        while True:
            pass
