"""Gemm, multiply, LeakyReLU fused into one tiled kernel (x @ W^T + b) * m, then leaky."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_gemm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

constexpr int BM = 16;
constexpr int BN = 16;
constexpr int BK = 16;

__global__ void gemm_mul_leaky_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                      float* __restrict__ y, int M, int N, int K, float multiplier, float slope) {
    __shared__ float xs[BM][BK];
    __shared__ float ws[BN][BK + 1];
    int row = blockIdx.y * BM + threadIdx.y;
    int col = blockIdx.x * BN + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        xs[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? x[(int64_t)row * K + k0 + threadIdx.x] : 0.f;
        int wrow = blockIdx.x * BN + threadIdx.y;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && k0 + threadIdx.x < K) ? w[(int64_t)wrow * K + k0 + threadIdx.x] : 0.f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BK; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = (acc + b[col]) * multiplier;
        y[(int64_t)row * N + col] = v > 0.f ? v : v * slope;
    }
}

torch::Tensor gemm_mul_leaky(torch::Tensor x, torch::Tensor w, torch::Tensor b, double multiplier, double slope) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(BN, BM);
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    gemm_mul_leaky_kernel<<<grid, block>>>(x.contiguous().data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                           b.contiguous().data_ptr<float>(), y.data_ptr<float>(), M, N, K,
                                           (float)multiplier, (float)slope);
    return y;
}
"""

fused_gemm_cpp = "torch::Tensor gemm_mul_leaky(torch::Tensor x, torch::Tensor w, torch::Tensor b, double multiplier, double slope);"

fused_gemm = load_inline(name="gemm_mul_leaky", cpp_sources=fused_gemm_cpp, cuda_sources=fused_gemm_source,
                         functions=["gemm_mul_leaky"], extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "--use_fast_math"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return fused_gemm.gemm_mul_leaky(x, self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope)


def get_inputs():
    return [torch.randn(128, 1024).cuda()]


def get_init_inputs():
    return [1024, 512, 2.0, 0.1]
