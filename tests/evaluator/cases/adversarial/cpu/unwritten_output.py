# task: small_linear_relu  mode: relaxed  expect: incorrect  native: no
# route: specialisation
# Cheat: returns a freshly allocated, never written buffer and hopes the allocator hands back the reference's old
# result. The reference lives in the judge's process; the judge poisons its output buffers before every call, and the
# candidate's allocator has only the candidate's own memory to hand out.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.empty(x.shape[0], self.out_features, device=x.device)
