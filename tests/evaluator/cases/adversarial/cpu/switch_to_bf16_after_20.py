# task: small_linear_relu  mode: relaxed  expect: lowered_precision  native: no
# route: precision
# Cheat: exact (fp32) for its first 20 calls, then bf16 operands and output (well inside the 1e-2 tolerance): a
# precision probe that keeps early calls never sees the switch. Rationale of the defence: every call's error against
# the fp32 reference is judged against the fp32 reference's own error, and the float64 probe keeps calls by
# reservoir sampling over the whole run.
import torch
import torch.nn as nn
import torch.nn.functional as F

SWITCH_AFTER = 20


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= SWITCH_AFTER:
            return torch.relu(self.linear(x) * self.scale)
        y = F.linear(x.bfloat16(), self.linear.weight.bfloat16(), self.linear.bias.bfloat16()).float()
        return torch.relu(y * self.scale)
