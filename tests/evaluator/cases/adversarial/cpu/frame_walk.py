# task: small_linear_relu  mode: relaxed  expect: forbidden_introspection
# Cheat: walks up the call stack to find the evaluator's reference outputs (every attribute reached by getattr so
# that the static pass sees nothing; the audit hook sees the frame access).
import sys
import torch
import torch.nn as nn

_frame = getattr(sys, "_get" + "frame")
_back, _locals = "f_" + "back", "f_" + "locals"


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        frame = _frame(1)
        while frame is not None and "golden" not in getattr(frame, _locals):
            frame = getattr(frame, _back)
        if frame is not None:
            return getattr(frame, _locals)["golden"].clone()
        return torch.relu(self.linear(x) * self.scale)
