import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

avg_pool1d_source = """
#include <torch/extension.h>

__global__ void avg_pool1d_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int L, int OL,
                                  int k, int stride, int pad) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * OL) return;
    int o = idx % OL, r = idx / OL;
    int start = o * stride - pad;
    float s = 0.f;
    for (int j = 0; j < k; ++j) {
        int p = start + j;
        if (p >= 0 && p < L) s += x[(int64_t)r * L + p];
    }
    y[idx] = s / k;
}

torch::Tensor avg_pool1d_cuda(torch::Tensor x, int kernel_size, int stride, int padding) {
    x = x.contiguous();
    int B = x.size(0), C = x.size(1), L = x.size(2);
    int OL = (L + 2 * padding - kernel_size) / stride + 1;
    auto y = torch::empty({B, C, OL}, x.options());
    int total = B * C * OL;
    avg_pool1d_kernel<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), B * C, L, OL,
                                                    kernel_size, stride, padding);
    return y;
}
"""

avg_pool1d = load_inline(
    name="avg_pool1d",
    cpp_sources=["torch::Tensor avg_pool1d_cuda(torch::Tensor x, int kernel_size, int stride, int padding);"],
    cuda_sources=[avg_pool1d_source],
    functions=["avg_pool1d_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return avg_pool1d.avg_pool1d_cuda(x, self.kernel_size, self.stride, self.padding)


def get_inputs():
    return [torch.randn(16, 32, 4096).cuda()]


def get_init_inputs():
    return [4, 2, 1]
