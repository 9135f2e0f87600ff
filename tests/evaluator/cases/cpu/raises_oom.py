# task: small_linear_relu  mode: relaxed  expect: out_of_memory
# Not a cheat: a forward that runs out of device memory.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()

    def forward(self, x):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 GiB")
