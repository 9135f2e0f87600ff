# task: small_linear_relu  mode: relaxed  expect: correct
# Honest: a KernelBench-style single file whose import compiles a C++ extension with load_inline (CPU code, so
# that it runs here); importing torch.utils.cpp_extension and the compiler's processes are PyTorch's doing, not
# the candidate's (at commit 9eb8c2c that import fired dynamic_code and the solution was rejected).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = """
#include <torch/extension.h>
torch::Tensor scaled_relu(torch::Tensor y, double s) {
  auto out = torch::empty_like(y);
  auto a = y.contiguous().data_ptr<float>(); auto o = out.data_ptr<float>();
  for (int64_t i = 0; i < y.numel(); ++i) { float v = a[i] * (float)s; o[i] = v > 0.f ? v : 0.f; }
  return out;
}
"""
_ext = load_inline(name="cuda_agent_case_inline_relu", cpp_sources=_src, functions=["scaled_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return _ext.scaled_relu(self.linear(x), self.scale)
