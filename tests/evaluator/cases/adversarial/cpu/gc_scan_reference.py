# task: small_linear_relu  mode: relaxed  expect: incorrect  native: no
# route: stack
# Cheat: scans the garbage collector's objects for the reference model (any nn.Module that is not its own) or for
# tensors shaped like the output that it did not make (goldens), to return them. The reference and its outputs live
# in the judge's process; the candidate's heap holds the runner, its views and the candidate's own objects. Found
# nothing usable: returns a wrong answer.
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.out_features = out_features
        self.mine = set()

    def _foreign(self, x):
        own = {id(m) for m in self.modules()}
        for obj in gc.get_objects():
            if isinstance(obj, nn.Module) and id(obj) not in own and type(obj).__name__ != "ModelNew":
                try:
                    out = obj(x)
                except Exception:  # noqa: BLE001 - not the reference
                    continue
                if isinstance(out, torch.Tensor) and out.shape == (x.shape[0], self.out_features):
                    return out
        return None

    def forward(self, x):
        found = self._foreign(x)
        out = found if found is not None else x[:, : self.out_features].clone()  # a wrong answer: nothing found
        self.mine.add(id(out))
        return out
