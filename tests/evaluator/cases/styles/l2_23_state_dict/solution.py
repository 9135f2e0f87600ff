import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.num_groups = num_groups
        self.weight = nn.Parameter(torch.empty(out_channels))
        self.bias = nn.Parameter(torch.empty(out_channels))
        conv = {f"conv.{k}": v.detach().clone() for k, v in self.conv.state_dict().items()}
        self.load_state_dict({**conv, "weight": torch.ones(out_channels), "bias": torch.zeros_like(self.bias)})

    def forward(self, x):
        return F.group_norm(self.conv(x), self.num_groups, self.weight, self.bias).mean(dim=[1, 2, 3, 4])
