# task: small_linear_relu  mode: relaxed  expect: lowered_precision|distribution_specialized  native: no
# route: precision
# Cheat: emulates bf16 inputs inside fp32 storage (mantissas truncated), so no half dtype ever appears (a dtype
# check would see nothing).
# Rejected by whichever probe sees it first: the inputs scaled by 10 (distribution_specialized) or the float64
# precision probe after the loop (lowered_precision).
import torch
import torch.nn as nn


def _truncate(t):
    return (t.contiguous().view(torch.int32) & -65536).view(torch.float32)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = torch.nn.functional.linear(_truncate(x), _truncate(self.linear.weight), self.linear.bias)
        return torch.relu(y * self.scale)
