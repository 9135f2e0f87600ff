import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tanh_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cmath>

__global__ void tanh_kernel(const float* input, float* output, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    for (int i = idx; i < n; i += stride) {
        output[i] = tanhf(input[i]);
    }
}

torch::Tensor tanh_cuda(torch::Tensor input) {
    auto output = torch::empty_like(input);
    int n = input.numel();
    int threads = 256;
    int blocks = std::min((n + threads - 1) / threads, 4096);
    tanh_kernel<<<blocks, threads>>>(input.data_ptr<float>(), output.data_ptr<float>(), n);
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "tanh_kernel launch failed: ", cudaGetErrorString(err));
    return output;
}
"""

tanh_cpp_source = "torch::Tensor tanh_cuda(torch::Tensor input);"

tanh_module = load_inline(
    name="tanh_module",
    cpp_sources=tanh_cpp_source,
    cuda_sources=tanh_source,
    functions=["tanh_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tanh_module = tanh_module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tanh_module.tanh_cuda(x)


def get_inputs():
    return [torch.randn(16, 16384).cuda()]


def get_init_inputs():
    return []
