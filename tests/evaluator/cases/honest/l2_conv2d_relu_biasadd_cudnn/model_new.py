import torch
import torch.nn as nn

from binding import ops

WORKSPACE_BYTES = 64 << 20


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        n, _, h, w = x.shape
        kh, kw = self.conv.kernel_size
        y = torch.empty((n, self.conv.out_channels, h - kh + 1, w - kw + 1), device=x.device, dtype=x.dtype)
        workspace = torch.empty(WORKSPACE_BYTES, device=x.device, dtype=torch.uint8)
        ops.conv2d_cudnn(x, self.conv.weight, y, workspace)
        ops.bias_relu_bias_(y, self.conv.bias, self.bias)
        return y
