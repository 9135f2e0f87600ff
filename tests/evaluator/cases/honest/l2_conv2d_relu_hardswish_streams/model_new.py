import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """conv (3x3) -> ReLU -> x * clamp((x + 3) / 6, 0, 1) in one kernel, the two halves of the batch on two streams."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)  # the reference's layer, same seed
        if self.conv.kernel_size != (3, 3) or self.conv.stride != (1, 1) or self.conv.padding != (0, 0):
            raise NotImplementedError("the kernel covers 3x3, stride 1, unpadded convolutions")
        self._side = None

    def forward(self, x):
        x = x.contiguous()
        n, _, h, w = x.shape
        y = torch.empty((n, self.conv.out_channels, h - 2, w - 2), device=x.device, dtype=x.dtype)
        half = n // 2
        if half == 0:
            ops.conv3x3_epilogue(x, self.conv.weight, self.conv.bias, y, 1, 1.0, 0.0)
            return y
        main = torch.cuda.current_stream(x.device)
        if self._side is None or self._side.device != x.device:
            self._side = torch.cuda.Stream(device=x.device)
        side = self._side
        side.wait_stream(main)  # fork: the inputs and y's allocation are ordered before the side stream's work
        ops.conv3x3_epilogue(x[:half], self.conv.weight, self.conv.bias, y[:half], 1, 1.0, 0.0)
        with torch.cuda.stream(side):
            ops.conv3x3_epilogue(x[half:], self.conv.weight, self.conv.bias, y[half:], 1, 1.0, 0.0)
        main.wait_stream(side)  # join: the output copy on the main stream waits for the second half
        y.record_stream(side)
        return y
