import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_channels, squeeze_channels, expand1x1_channels, expand3x3_channels):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        n, _, h, w = x.shape
        squeezed = torch.empty((n, self.squeeze.out_channels, h, w), device=x.device, dtype=x.dtype)
        out = torch.empty((n, self.expand1x1.out_channels + self.expand3x3.out_channels, h, w), device=x.device,
                          dtype=x.dtype)
        ops.fire_forward(x, self.squeeze.weight, self.squeeze.bias, self.expand1x1.weight, self.expand1x1.bias,
                         self.expand3x3.weight, self.expand3x3.bias, squeezed, out)
        return out
