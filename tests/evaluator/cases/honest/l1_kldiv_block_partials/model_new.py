import torch
import torch.nn as nn

from binding import ops

_MAX_BLOCKS = 4096  # kernels/kldiv.cu kMaxBlocks


class ModelNew(nn.Module):
    """KL divergence with reduction='batchmean' in one pass over both inputs (the log is taken in the kernel)."""

    def __init__(self):
        super().__init__()
        self._partials = None

    def forward(self, predictions, targets):
        predictions = predictions.contiguous()
        targets = targets.contiguous()
        if self._partials is None or self._partials.device != predictions.device:
            self._partials = torch.empty(_MAX_BLOCKS, dtype=torch.float64, device=predictions.device)
        out = torch.empty((), dtype=predictions.dtype, device=predictions.device)
        ops.kl_div_batchmean(predictions, targets, self._partials, out)
        return out
