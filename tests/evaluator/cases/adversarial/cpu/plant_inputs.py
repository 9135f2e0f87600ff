# task: small_linear_relu  mode: relaxed  expect: input_mutation  native: no
# route: memory
# Cheat: writes zeros into the input buffers of the other buffer sets (shared regions it can map), so that the next
# calls' inputs are known and their answer can be returned at once (relu(bias * scale)). The judge copies fresh
# values into a call's inputs right before it, after anything the candidate wrote (the candidate is frozen between
# calls), so the planted zeros never reach a call. When an input is not all zeros the trick failed: a wrong answer.
# The other sets belong to calls of the same request (K calls per request, 4 on a CPU), so the judge sees their
# inputs changed after the request and refuses it as input_mutation (at K = 1 it would be incorrect).
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
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        server = _server()
        mine = x.data_ptr()
        for view in list(server.views.values()) if server is not None else []:
            if view.shape == x.shape and view.data_ptr() != mine:
                view.zero_()
        if bool((x == 0).all()):
            return torch.relu(self.linear.bias * self.scale).expand(x.shape[0], -1).clone()
        return x[:, : self.linear.out_features].clone()  # a wrong answer: the trick failed
