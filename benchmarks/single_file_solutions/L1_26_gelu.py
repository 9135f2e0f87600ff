"""GELU (tanh approximation) with the constants hoisted; launches on PyTorch's current stream."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gelu_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

constexpr float kAlpha = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kBeta = 0.044715f;

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float inner = kAlpha * (v + kBeta * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "gelu_forward expects a contiguous CUDA tensor");
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    constexpr int kThreads = 256;
    auto stream = c10::cuda::getCurrentCUDAStream();
    gelu_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

gelu_cpp = "torch::Tensor gelu_forward(torch::Tensor x);"

gelu_ext = load_inline(name="gelu_ext", cpp_sources=gelu_cpp, cuda_sources=gelu_source,
                       functions=["gelu_forward"], extra_cuda_cflags=["-O3", "--use_fast_math"])


class ModelNew(nn.Module):
    def forward(self, x):
        return gelu_ext.gelu_forward(x.contiguous())


def get_inputs():
    return [torch.randn(16, 16384).cuda()]


def get_init_inputs():
    return []
