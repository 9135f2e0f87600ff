# task: small_linear_relu  mode: relaxed  expect: incorrect  native: no
# route: control_channel
# Cheat: returns a tensor subclass that could compute (or fake) its values when the checker reads them. The judge
# reads plain bytes from shared memory; the runner copies only plain tensors into it and reports the subclass as not
# copied, so the outputs are not there to compare.
import torch
import torch.nn as nn


class LazyTensor(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.linear(x) * self.scale).as_subclass(LazyTensor)
