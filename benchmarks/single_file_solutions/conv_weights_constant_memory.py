"""1D convolution whose filter lives in __constant__ memory, filled with cudaMemcpyToSymbol."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

conv1d_const_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

#define MAX_TAPS 64
__constant__ float c_taps[MAX_TAPS];

__global__ void conv1d_const_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int L, int taps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    int OL = L - taps + 1;
    if (r >= rows || i >= OL) return;
    const float* row = x + (int64_t)r * L;
    float acc = 0.f;
    for (int t = 0; t < taps; ++t) acc += row[i + t] * c_taps[t];
    y[(int64_t)r * OL + i] = acc;
}

torch::Tensor conv1d_const(torch::Tensor x, torch::Tensor taps) {
    int n_taps = taps.numel();
    TORCH_CHECK(n_taps <= MAX_TAPS, "at most 64 taps");
    auto t = taps.contiguous().to(torch::kCPU);
    cudaMemcpyToSymbol(c_taps, t.data_ptr<float>(), n_taps * sizeof(float));
    auto xc = x.contiguous();
    int rows = xc.numel() / xc.size(-1), L = xc.size(-1), OL = L - n_taps + 1;
    auto y = torch::empty({rows, OL}, xc.options());
    dim3 grid((OL + 255) / 256, rows);
    conv1d_const_kernel<<<grid, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, L, n_taps);
    return y;
}
"""

conv1d = load_inline(name="conv1d_const", cpp_sources="torch::Tensor conv1d_const(torch::Tensor x, torch::Tensor taps);",
                     cuda_sources=conv1d_const_source, functions=["conv1d_const"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, taps: int):
        super().__init__()
        self.taps = nn.Parameter(torch.randn(taps))

    def forward(self, x):
        return conv1d.conv1d_const(x, self.taps.detach())


def get_inputs():
    return [torch.randn(256, 4096).cuda()]


def get_init_inputs():
    return [16]
