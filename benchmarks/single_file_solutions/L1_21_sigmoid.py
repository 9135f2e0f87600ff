"""Sigmoid, vectorised with float4 loads where the size allows."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sigmoid_cuda = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ float sigmoidf(float v) { return 1.0f / (1.0f + __expf(-v)); }

__global__ void sigmoid_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        y[i] = make_float4(sigmoidf(v.x), sigmoidf(v.y), sigmoidf(v.z), sigmoidf(v.w));
    }
}

__global__ void sigmoid_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int start, int n) {
    int i = start + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sigmoidf(x[i]);
}

torch::Tensor sigmoid_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int n = xc.numel();
    int n4 = n / 4;
    const int threads = 256;
    if (n4 > 0) {
        sigmoid_vec4_kernel<<<(n4 + threads - 1) / threads, threads>>>(
            reinterpret_cast<const float4*>(xc.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    int tail = n - n4 * 4;
    if (tail > 0) {
        sigmoid_tail_kernel<<<1, 32>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    return y;
}
"""

sigmoid_cpp = "torch::Tensor sigmoid_forward(torch::Tensor x);"

sigmoid_ext = load_inline(
    name="fast_sigmoid",
    cpp_sources=[sigmoid_cpp],
    cuda_sources=[sigmoid_cuda],
    functions=["sigmoid_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return sigmoid_ext.sigmoid_forward(x)


def get_inputs():
    return [torch.randn(16, 16387).cuda()]


def get_init_inputs():
    return []
