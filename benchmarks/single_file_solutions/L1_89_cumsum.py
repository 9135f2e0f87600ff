"""Inclusive prefix sum along the last dimension: a block-level Hillis-Steele scan per row chunk plus carries."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scan_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

constexpr int SCAN_BLOCK = 1024;

__global__ void row_scan_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float buf[SCAN_BLOCK];
    __shared__ float carry;
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    if (threadIdx.x == 0) carry = 0.f;
    __syncthreads();
    for (int base = 0; base < cols; base += SCAN_BLOCK) {
        int c = base + threadIdx.x;
        buf[threadIdx.x] = c < cols ? row[c] : 0.f;
        __syncthreads();
        for (int offset = 1; offset < SCAN_BLOCK; offset <<= 1) {
            float v = threadIdx.x >= offset ? buf[threadIdx.x - offset] : 0.f;
            __syncthreads();
            buf[threadIdx.x] += v;
            __syncthreads();
        }
        if (c < cols) out[c] = buf[threadIdx.x] + carry;
        __syncthreads();
        if (threadIdx.x == SCAN_BLOCK - 1) carry += buf[SCAN_BLOCK - 1];
        __syncthreads();
    }
}

torch::Tensor cumsum_lastdim(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int cols = xc.size(-1);
    int rows = xc.numel() / cols;
    row_scan_kernel<<<rows, SCAN_BLOCK>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""

scan = load_inline(name="row_scan", cpp_sources="torch::Tensor cumsum_lastdim(torch::Tensor x);",
                   cuda_sources=scan_source, functions=["cumsum_lastdim"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return scan.cumsum_lastdim(x.movedim(self.dim, -1)).movedim(-1, self.dim)


def get_inputs():
    return [torch.randn(128, 4000).cuda()]


def get_init_inputs():
    return [1]
