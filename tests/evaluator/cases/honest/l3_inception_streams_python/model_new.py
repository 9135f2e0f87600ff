import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_1x1, reduce_3x3, out_3x3, reduce_5x5, out_5x5, pool_proj):
        super().__init__()
        self.branch1x1 = nn.Conv2d(in_channels, out_1x1, kernel_size=1)
        self.branch3x3 = nn.Sequential(
            nn.Conv2d(in_channels, reduce_3x3, kernel_size=1),
            nn.Conv2d(reduce_3x3, out_3x3, kernel_size=3, padding=1),
        )
        self.branch5x5 = nn.Sequential(
            nn.Conv2d(in_channels, reduce_5x5, kernel_size=1),
            nn.Conv2d(reduce_5x5, out_5x5, kernel_size=5, padding=2),
        )
        self.branch_pool = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1),
            nn.Conv2d(in_channels, pool_proj, kernel_size=1),
        )
        self._streams = {}

    def _side_streams(self, device):
        if device not in self._streams:
            self._streams[device] = [torch.cuda.Stream(device=device) for _ in range(3)]
        return self._streams[device]

    def forward(self, x):
        n, _, h, w = x.shape
        c1 = self.branch1x1.out_channels
        r3, c3 = self.branch3x3[0].out_channels, self.branch3x3[1].out_channels
        r5, c5 = self.branch5x5[0].out_channels, self.branch5x5[1].out_channels
        cp = self.branch_pool[1].out_channels
        dev, dt = x.device, x.dtype
        # Everything is allocated on the caller's stream before the fork; the join below orders every later reuse.
        out = torch.empty((n, c1 + c3 + c5 + cp, h, w), device=dev, dtype=dt)
        red3 = torch.empty((n, r3, h, w), device=dev, dtype=dt)
        red5 = torch.empty((n, r5, h, w), device=dev, dtype=dt)
        col3 = torch.empty((r3 * 9, h * w), device=dev, dtype=dt)
        col5 = torch.empty((r5 * 25, h * w), device=dev, dtype=dt)
        pooled = torch.empty_like(x)

        main = torch.cuda.current_stream(dev)
        s1, s3, s5 = self._side_streams(dev)
        fork = torch.cuda.Event()
        fork.record(main)
        for s in (s1, s3, s5):
            s.wait_event(fork)
        with torch.cuda.stream(s1):
            ops.conv1x1_into(x, self.branch1x1.weight, self.branch1x1.bias, out, 0)
        with torch.cuda.stream(s3):
            ops.conv1x1_into(x, self.branch3x3[0].weight, self.branch3x3[0].bias, red3, 0)
            ops.conv_kxk_into(red3, self.branch3x3[1].weight, self.branch3x3[1].bias, out, col3, c1, 1)
        with torch.cuda.stream(s5):
            ops.conv1x1_into(x, self.branch5x5[0].weight, self.branch5x5[0].bias, red5, 0)
            ops.conv_kxk_into(red5, self.branch5x5[1].weight, self.branch5x5[1].bias, out, col5, c1 + c3, 2)
        ops.max_pool3x3_s1p1(x, pooled)
        ops.conv1x1_into(pooled, self.branch_pool[1].weight, self.branch_pool[1].bias, out, c1 + c3 + c5)
        for s in (s1, s3, s5):
            done = torch.cuda.Event()
            done.record(s)
            main.wait_event(done)
        return out
