import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """conv (3x3, stride 1, no padding) -> / divisor -> LeakyReLU(0.01), one kernel."""

    def __init__(self, in_channels, out_channels, kernel_size, divisor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)  # the reference's layer, same seed
        self.divisor = float(divisor)
        if self.conv.kernel_size != (3, 3) or self.conv.stride != (1, 1) or self.conv.padding != (0, 0):
            raise NotImplementedError("the kernel covers 3x3, stride 1, unpadded convolutions")

    def forward(self, x):
        x = x.contiguous()
        n, _, h, w = x.shape
        y = torch.empty((n, self.conv.out_channels, h - 2, w - 2), device=x.device, dtype=x.dtype)
        ops.conv3x3_epilogue(x, self.conv.weight, self.conv.bias, y, 0, self.divisor, 0.01)
        return y
