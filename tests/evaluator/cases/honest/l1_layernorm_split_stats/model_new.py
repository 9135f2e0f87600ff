import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # same parameters as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.ln.weight.numel()
        samples = x.numel() // n
        sums = torch.zeros((samples, 2), device=x.device, dtype=torch.float64)
        stats = torch.empty((samples, 2), device=x.device, dtype=torch.float32)
        out = torch.empty_like(x)
        ops.layer_norm(x, self.ln.weight, self.ln.bias, out, sums, stats, float(self.ln.eps))
        return out
