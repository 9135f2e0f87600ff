import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, bias: bool = False):
        super().__init__()
        # Same layer, same order, same seed as the reference: the weights are the reference's.
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride, padding=padding,
                                groups=in_channels, bias=bias)
        self.k, self.s, self.p = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        ho = (h + 2 * self.p - self.k) // self.s + 1
        wo = (w + 2 * self.p - self.k) // self.s + 1
        out = torch.empty((n, c, ho, wo), device=x.device, dtype=x.dtype)
        bias = self.conv2d.bias
        ops.depthwise_conv2d(x, self.conv2d.weight, bias if bias is not None else self.conv2d.weight, bias is not None,
                             out, self.s, self.p)
        return out
