import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        ops.softmax(x, y)  # our kernel (kernels/softmax.cu), softmax over dim 1
        return y
