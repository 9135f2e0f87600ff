import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.num_groups = num_groups
        self.register_buffer("beta", self.conv.weight.new_zeros(1, out_channels, 1, 1, 1))
        self.register_buffer("gamma", torch.full((1, out_channels, 1, 1, 1), 1.0))

    def forward(self, x):
        y = self.conv(x)
        n, c = y.shape[:2]
        g = y.reshape(n, self.num_groups, -1)
        mean = g.mean(-1, keepdim=True)
        var = g.var(-1, unbiased=False, keepdim=True)
        z = ((g - mean) * torch.rsqrt(var + 1e-5)).reshape(y.shape)
        return (z * self.gamma + self.beta).mean(dim=[1, 2, 3, 4])
