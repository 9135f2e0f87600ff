# task: small_linear_relu  mode: relaxed  expect: crashed
# Not a cheat: a candidate that kills its process (as a segfault or a device abort would). The caller must get a
# result, not die with it.
import ctypes
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()

    def forward(self, x):
        ctypes.string_at(0)  # a read of address 0: SIGSEGV, as a segfaulting kernel launch would
