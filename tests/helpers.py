"""Small task and kernel texts the tests share (imported as ``helpers``: pytest puts tests/ on sys.path)."""
from __future__ import annotations

# The smallest valid KernelBench-format task (ReLU over 16 floats), for tests of loading, workspaces and commands.
RELU_TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(16)]

def get_init_inputs():
    return []
"""

# A correct elementwise ReLU in the workspace ABI (float32, any size): the smallest real kernel file.
RELU_KERNEL = """#include "cuda_agent.h"
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
void relu(ca::Tensor x, ca::Tensor out) {
  int64_t n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
CA_EXPORT(relu);
"""
