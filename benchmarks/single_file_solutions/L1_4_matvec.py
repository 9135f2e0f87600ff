"""Matrix-vector product, one warp per row with shuffles."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matvec_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void matvec_kernel(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y, int M, int K) {
    int warp_id = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp_id >= M) return;
    const float* row = A + (int64_t)warp_id * K;
    float sum = 0.f;
    for (int k = lane; k < K; k += 32) sum += row[k] * x[k];
    #pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[warp_id] = sum;
}

torch::Tensor matvec_cuda(torch::Tensor A, torch::Tensor B) {
    int M = A.size(0), K = A.size(1);
    auto y = torch::empty({M, 1}, A.options());
    const int threads = 256;
    const int blocks = (M * 32 + threads - 1) / threads;
    matvec_kernel<<<blocks, threads>>>(A.contiguous().data_ptr<float>(), B.contiguous().data_ptr<float>(), y.data_ptr<float>(), M, K);
    return y;
}
"""

matvec = load_inline(name="matvec_warp", cpp_sources="torch::Tensor matvec_cuda(torch::Tensor A, torch::Tensor B);",
                     cuda_sources=matvec_source, functions=["matvec_cuda"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return matvec.matvec_cuda(A, B)


def get_inputs():
    return [torch.randn(1024, 4096).cuda(), torch.randn(4096, 1).cuda()]


def get_init_inputs():
    return []
