import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """conv3d -> softmax(dim=1) -> MaxPool3d(2) -> MaxPool3d(2), as one max over 4x4x4 windows (exact: max is
    associative and both pools floor their sizes)."""

    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)  # the reference's layers, same seed
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)
        if pool_kernel_size != 2 or self.conv.kernel_size != (3, 3, 3) or self.conv.padding != (0, 0, 0) \
                or self.conv.stride != (1, 1, 1) or out_channels != 16:
            raise NotImplementedError("the kernel covers a 3x3x3 conv to 16 channels and two 2x2x2 pools")

    def forward(self, x):
        x = x.contiguous()
        n, _, d, h, w = x.shape
        shape = (n, self.conv.out_channels, (d - 2) // 2 // 2, (h - 2) // 2 // 2, (w - 2) // 2 // 2)
        y = torch.empty(shape, device=x.device, dtype=x.dtype)
        ops.conv3d_softmax_double_pool(x, self.conv.weight, self.conv.bias, y)
        return y
