import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """C = diag(A) @ B computed as a row scaling of B (never forms the N x N diagonal matrix)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        out = torch.empty_like(B)
        ops.diag_matmul(A, B, out)
        return out
