# task: tiny_mean  mode: relaxed  expect: correct
# Honest: the mean computed another way (sum, then divide).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.sum(dim=1) / x.shape[1]
