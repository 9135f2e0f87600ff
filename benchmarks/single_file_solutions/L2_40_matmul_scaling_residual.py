"""Linear (cuBLAS through torch) followed by a fused scale-and-residual kernel."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_residual_kernel(const float* __restrict__ y, float* __restrict__ out, float scaling, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i];
        out[i] = v * scaling + v;
    }
}

torch::Tensor scale_residual(torch::Tensor y, float scaling) {
    auto out = torch::empty_like(y);
    int n = y.numel();
    const int threads = 256;
    scale_residual_kernel<<<(n + threads - 1) / threads, threads>>>(y.data_ptr<float>(), out.data_ptr<float>(), scaling, n);
    return out;
}

torch::Tensor linear_scale_residual(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, float scaling) {
    auto y = torch::addmm(bias, x, weight.t()).contiguous();
    return scale_residual(y, scaling);
}
"""

fused_cpp = """
torch::Tensor scale_residual(torch::Tensor y, float scaling);
torch::Tensor linear_scale_residual(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, float scaling);
"""

fused = load_inline(name="linear_scale_residual", cpp_sources=fused_cpp, cuda_sources=fused_source,
                    functions=["scale_residual", "linear_scale_residual"], verbose=False,
                    extra_cflags=["-O3"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return fused.linear_scale_residual(x, self.matmul.weight, self.matmul.bias, self.scaling_factor)


def get_inputs():
    return [torch.randn(128, 64).cuda()]


def get_init_inputs():
    return [64, 128, 0.5]
