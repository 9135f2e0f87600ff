import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        norm = nn.GroupNorm(num_groups, out_channels)
        self.num_groups = num_groups
        self.register_buffer("coeff", (norm.weight / out_channels).detach().clone())
        self.register_buffer("offset", norm.bias.detach().mean().reshape(1))

    def forward(self, x):
        y = self.conv(x)
        n, c = y.shape[:2]
        g = y.reshape(n, self.num_groups, -1)
        mu = g.mean(-1)
        rstd = torch.rsqrt(g.var(-1, unbiased=False) + 1e-5)
        m = y.reshape(n, c, -1).mean(-1)
        per_group = c // self.num_groups
        centred = (m.reshape(n, self.num_groups, per_group) - mu[..., None]) * rstd[..., None]
        return centred.reshape(n, c) @ self.coeff + self.offset
