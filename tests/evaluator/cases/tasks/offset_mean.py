import torch
import torch.nn as nn


class Model(nn.Module):
    """Row means carried through large intermediate values: on inputs scaled by 0.01 the outputs vary by a few
    millionths around 100, less than the float32 reference's own rounding at 300 (an ulp there is 3e-5), as L2/42's
    logsumexp of near-equal channel means does."""

    def forward(self, x):
        return (x.mean(dim=1) + 100.0) * 3.0 - 200.0


batch_size = 16
dim = 1 << 20


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
