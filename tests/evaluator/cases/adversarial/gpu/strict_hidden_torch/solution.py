# task: small_linear_relu  mode: strict  expect: torch_compute_in_forward
# Cheat: in strict mode, computes with PyTorch ops reached by getattr so that the static pass misses them; the
# dispatcher guard sees them run.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        layer = getattr(self, "lin" + "ear")
        return getattr(torch, "re" + "lu")(layer(x) * self.scale)
