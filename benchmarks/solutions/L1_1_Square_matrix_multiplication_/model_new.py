import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """Square fp32 matrix product through cuBLAS SGEMM (default math mode: full fp32)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        C = torch.empty((A.shape[0], B.shape[1]), device=A.device, dtype=A.dtype)
        ops.matmul_forward(A, B, C)
        return C
