# task: small_linear_relu  mode: relaxed  expect: unwritten_output
# Cheat: returns a freshly allocated buffer and hopes the allocator hands back the reference's old result.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.empty(x.shape[0], self.out_features, device=x.device)
