import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        out = torch.empty((A.shape[0], B.shape[1]), device=A.device, dtype=A.dtype)
        ops.matvec(A, B, out)
        return out
