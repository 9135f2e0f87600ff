import torch
import torch.nn as nn


class Model(nn.Module):
    """A shift by a large constant and its undo, as a stabilised sum does: in float32 the shift rounds x to steps of
    2**-5 (errors up to 0.016, beyond the 1e-2 tolerance on values below 0.6); in float64 the result is x exactly.
    The float32 reference is not the true result here (KernelBench L2/14's sum of cancelling GEMM columns is the same
    on inputs scaled by -3, at about 0.05)."""

    def __init__(self):
        super().__init__()
        self.shift = 2.0 ** 18

    def forward(self, x):
        return (x + self.shift) - self.shift


batch_size = 16
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
