# task: small_linear_relu  mode: relaxed  expect: runtime_error
# Not a cheat: a forward that raises (a failed CA_CHECK, a bad argument).
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()

    def forward(self, x):
        raise ValueError("kernel expects a contiguous input")
