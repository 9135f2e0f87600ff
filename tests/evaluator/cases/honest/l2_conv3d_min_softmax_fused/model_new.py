import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """conv3d -> min over depth -> softmax over channels, fused (the conv output never reaches memory)."""

    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)  # the reference's layer, same seed
        self.dim = dim
        if self.dim != 2 or self.conv.kernel_size != (3, 3, 3) or self.conv.stride != (1, 1, 1) \
                or self.conv.padding != (0, 0, 0):
            raise NotImplementedError("the kernel covers a 3x3x3 unpadded conv and the min over depth")

    def forward(self, x):
        x = x.contiguous()
        n, _, _, h, w = x.shape
        y = torch.empty((n, self.conv.out_channels, h - 2, w - 2), device=x.device, dtype=x.dtype)
        ops.conv3d_min_softmax_forward(x, self.conv.weight, self.conv.bias, y)
        return y
