import torch
import torch.nn as nn

from binding import ops

COL_STRIDE, CLAMP = 1, False  # see CASE


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._partials = None

    def forward(self, predictions, targets):
        predictions = predictions.contiguous()
        targets = targets.contiguous()
        if self._partials is None or self._partials.device != predictions.device:
            self._partials = torch.empty(4096, dtype=torch.float64, device=predictions.device)
        out = torch.empty((), dtype=predictions.dtype, device=predictions.device)
        ops.hinge_mean(predictions, targets, self._partials, out, COL_STRIDE, CLAMP)
        return out
