# task: small_linear_relu  mode: relaxed  expect: forbidden_introspection
# Cheat: installs a profile function, which would run inside the evaluator on every call from then on (reached
# through torch and a built name so that the static pass sees neither "sys" nor "setprofile").
import torch
import torch.nn as nn
import torch.utils.data.dataloader as _dl

_calls = []


def _spy(frame, event, arg):
    _calls.append(event)


getattr(getattr(_dl.threading, "_sys"), "set" + "profile")(_spy)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.linear(x) * self.scale)
