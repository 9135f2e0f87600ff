# task: small_linear_relu  mode: strict  expect: torch_compute_in_forward  native: no
# route: strict
# Cheat: strict mode, but forward is PyTorch's own linear, scale and relu (reached by getattr so that the static pass
# sees nothing). The kernel tap records the aten operators each call ran, on a CPU as on a GPU.
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
