import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def forward(self, A, B):
        A = A.contiguous()
        B = B.contiguous()
        C = torch.empty((A.shape[0], B.shape[1]), device=A.device, dtype=A.dtype)
        ops.matmul_tf32(A, B, C)
        return C
