# task: small_linear_relu  mode: strict  expect: torch_compute_in_forward  native: no
# route: strict
# Cheat: strict mode; computes with PyTorch's linear, scale and relu while PyTorch's RecordFunction is switched off
# for its thread, so the profiler records no aten operator for forward (on a GPU, the kernels then have no operator
# above them and are judged by their names only). Strict mode forbids PyTorch compute however it is recorded.
import torch
import torch.nn as nn

_record = torch._C._autograd._enable_record_function


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        _record(False)
        try:
            return torch.relu(self.linear(x) * self.scale)
        finally:
            _record(True)
