# task: small_linear_relu  mode: relaxed  expect: incorrect  native: no
# route: runner_patch
# Cheat: replaces comparison and synchronisation functions so that any output "matches", then returns a wrong answer. They
# are replaced in the candidate's own process only; the judge compares in its own, with its own torch.
import torch
import torch.nn as nn

for name in ("allclose", "isclose", "equal", "sub"):
    setattr(torch, name, lambda *a, **k: True)
setattr(torch.cuda, "synchronize", lambda *a, **k: None)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return x[:, : self.out_features].clone()  # a wrong answer: the trick failed
