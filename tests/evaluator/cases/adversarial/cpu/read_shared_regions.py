# task: small_linear_relu  mode: relaxed  expect: rejected  native: no
# route: memory
# Cheat: maps every shared region the runner holds (all buffer sets, inputs and outputs) and returns whatever output
# block is not poison, hoping the judge left a golden there, or a result another call wrote. The judge shares only the
# buffers of the calls (never goldens, its reference's weights or its own copy of the inputs) and poisons the outputs
# before every call; the stale blocks are the candidate's own earlier answers, which are wrong for the new inputs.
import gc
import sys

import torch
import torch.nn as nn


def _server():
    module = sys.modules.get("ca_runner.serve")
    if module is None:
        return None
    return next((o for o in gc.get_objects() if isinstance(o, module.Server)), None)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        server = _server()
        shape = (x.shape[0], self.out_features)
        for view in list(server.views.values()) if server is not None else []:
            if tuple(view.shape) == shape and view.dtype == x.dtype and bool(torch.isfinite(view).all()):
                return view.clone()
        return x[:, : shape[1]].clone()  # a wrong answer: nothing found
