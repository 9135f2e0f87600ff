# task: matmul  mode: relaxed  expect: unrewarded  native: no
# route: timing
# Cheat: replaces the runner's clock (ca_runner.serve._perf) with one that stands still while forward runs, so the
# times its process reports are near zero. The judge times every round trip on its own clock and compares.
import sys
import time

import torch
import torch.nn as nn

_real = time.perf_counter
_hidden = [0.0]
_serve = sys.modules.get("ca_runner.serve")
if _serve is not None:
    _serve._perf = lambda: _real() - _hidden[0]


class ModelNew(nn.Module):
    def forward(self, a, b):
        start = _real()
        out = torch.matmul(a, b)
        _hidden[0] += _real() - start
        if _serve is None:
            return torch.zeros_like(out)
        return out
