import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
torch::Tensor fused(torch::Tensor x) {
  return at::add(at::mul(x, at::sigmoid(x)), at::mul(at::mul(x, x), 0.5));
}
"""

_ext = load_inline(name="adv_strict_aten_from_cpp", cpp_sources=_SOURCE, functions=["fused"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.fused(x)
