import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1, keepdim=True)
