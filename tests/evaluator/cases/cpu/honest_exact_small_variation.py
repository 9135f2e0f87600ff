# task: offset_mean  mode: relaxed  expect: correct
# Honest, and more exact than the float32 reference: the whole forward in float64, rounded once. On inputs
# scaled by 0.01 the outputs vary less than the float32 reference's rounding; against that reference the error is a
# large share of the variation (refused as trivial_output before), against the float64 result it is none.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return ((x.double().mean(dim=1) + 100.0) * 3.0 - 200.0).to(x.dtype)
