import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    """Hinge loss as a two-pass reduction: per-block partial sums, then one block adds them up."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        blocks = max(1, min(132 * 8, (predictions.numel() + 2047) // 2048))
        partial = torch.empty(blocks, device=predictions.device, dtype=torch.float32)
        out = torch.empty((), device=predictions.device, dtype=torch.float32)
        ops.hinge_forward(predictions, targets, partial, out)
        return out
