# task: offset_mean  mode: relaxed  expect: trivial_output  native: no
# route: degenerate
# Cheat: the outputs vary by a few ten-thousandths around 101.5, so the constant 101.5 passes a plain allclose; it is
# as far from the float64 result's variation as from the float32 reference's (the trivial-output check's float64
# judgement, made for honest kernels more exact than the reference, excuses no constant).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full((x.shape[0],), 101.5, dtype=x.dtype, device=x.device)
