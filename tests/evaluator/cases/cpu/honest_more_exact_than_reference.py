# task: shift_and_undo  mode: relaxed  expect: correct
# Honest, and more exact than the float32 reference: the shift and its undo cancel, so forward returns x. Outside the
# tolerance of the float32 reference (its own rounding), within it of the float64 reference: correct.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
