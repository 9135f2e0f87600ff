import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """Conv3d -> GroupNorm -> mean over (C, D, H, W), without materialising the conv output.

    Every parameter is read at call time (nothing folded), so perturbed conv or GroupNorm parameters give the
    right non-zero answer too."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        n = x.shape[0]
        c = self.conv.out_channels
        sums = torch.empty((n, c, 2), device=x.device, dtype=torch.float64)
        out = torch.empty((n,), device=x.device, dtype=x.dtype)
        ops.conv3d_channel_sums(x, self.conv.weight, self.conv.bias, sums)
        ops.groupnorm_mean_from_sums(sums, self.group_norm.weight, self.group_norm.bias, out,
                                     self.group_norm.num_groups, float(self.group_norm.eps),
                                     self._spatial(x))
        return out

    def _spatial(self, x) -> int:
        k = self.conv.kernel_size
        return (x.shape[2] - k[0] + 1) * (x.shape[3] - k[1] + 1) * (x.shape[4] - k[2] + 1)
