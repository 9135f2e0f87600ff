"""LeakyReLU with the slope passed from Python."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void leaky_relu_kernel(const float* x, float* out, float slope, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = x[idx];
        out[idx] = v >= 0.f ? v : v * slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, float negative_slope) {
    auto out = torch::empty_like(x);
    int size = x.numel();
    const int block_size = 512;
    const int num_blocks = (size + block_size - 1) / block_size;
    leaky_relu_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), negative_slope, size);
    return out;
}
"""

cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, float negative_slope);"

leaky = load_inline(name="leaky_relu", cpp_sources=cpp_source, cuda_sources=source,
                    functions=["leaky_relu_cuda"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return leaky.leaky_relu_cuda(x.contiguous(), self.negative_slope)


def get_inputs():
    return [torch.randn(16, 16384).cuda()]


def get_init_inputs():
    return [0.01]
