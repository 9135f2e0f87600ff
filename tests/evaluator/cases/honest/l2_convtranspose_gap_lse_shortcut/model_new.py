import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """mean_{h,w} ConvTranspose2d(x)[n, co] for stride 1, no padding: each input pixel meets every kernel tap inside
    the (H+k-1) x (W+k-1) output, so the mean is bias[co] + sum_ci (sum_taps W[ci, co]) * sum_hw x[n, ci] / area.
    The tap sums and both biases are folded here (float64); forward reads x once."""

    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)  # the reference's order
        self.bias = nn.Parameter(torch.randn(bias_shape))
        ct = self.conv_transpose
        if (ct.stride, ct.padding, ct.output_padding, ct.dilation, ct.groups) != ((1, 1), (0, 0), (0, 0), (1, 1), 1) \
                or ct.kernel_size[0] != ct.kernel_size[1]:
            raise NotImplementedError("the shortcut covers a square stride-1 unpadded ConvTranspose2d only")
        self.kernel = int(ct.kernel_size[0])
        with torch.no_grad():
            wsum = ct.weight.double().sum(dim=(2, 3))  # (Cin, Cout)
            cbias = ct.bias.double() + self.bias.double().reshape(-1)
        self.register_buffer("wsum", wsum.contiguous())
        self.register_buffer("cbias", cbias.contiguous())

    def forward(self, x):
        x = x.contiguous()
        n, cin = x.shape[0], x.shape[1]
        plane = torch.empty((n * cin,), device=x.device, dtype=torch.float64)
        out = torch.empty((n, 1), device=x.device, dtype=x.dtype)
        ops.convt_gap_lse(x, self.wsum, self.cbias, plane, out, self.kernel, 10.0)
        return out
