import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

bmm_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE_SIZE 16

__global__ void bmm_kernel(const float* A, const float* B, float* C, int batch, int M, int K, int N) {
    int b = blockIdx.z;
    int row = blockIdx.y * TILE_SIZE + threadIdx.y;
    int col = blockIdx.x * TILE_SIZE + threadIdx.x;
    __shared__ float tileA[TILE_SIZE][TILE_SIZE];
    __shared__ float tileB[TILE_SIZE][TILE_SIZE];
    const float* a = A + (int64_t)b * M * K;
    const float* bb = B + (int64_t)b * K * N;
    float sum = 0.0f;
    for (int t = 0; t < (K + TILE_SIZE - 1) / TILE_SIZE; t++) {
        int ac = t * TILE_SIZE + threadIdx.x;
        int br = t * TILE_SIZE + threadIdx.y;
        tileA[threadIdx.y][threadIdx.x] = (row < M && ac < K) ? a[row * K + ac] : 0.0f;
        tileB[threadIdx.y][threadIdx.x] = (br < K && col < N) ? bb[br * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE_SIZE; k++) sum += tileA[threadIdx.y][k] * tileB[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(int64_t)b * M * N + row * N + col] = sum;
}

torch::Tensor bmm_cuda(torch::Tensor A, torch::Tensor B) {
    int batch = A.size(0), M = A.size(1), K = A.size(2), N = B.size(2);
    auto C = torch::empty({batch, M, N}, A.options());
    dim3 threads(TILE_SIZE, TILE_SIZE);
    dim3 blocks((N + TILE_SIZE - 1) / TILE_SIZE, (M + TILE_SIZE - 1) / TILE_SIZE, batch);
    bmm_kernel<<<blocks, threads>>>(A.contiguous().data_ptr<float>(), B.contiguous().data_ptr<float>(), C.data_ptr<float>(), batch, M, K, N);
    return C;
}
"""

bmm_cpp_source = "torch::Tensor bmm_cuda(torch::Tensor A, torch::Tensor B);"

bmm = load_inline(
    name="bmm_tiled",
    cpp_sources=bmm_cpp_source,
    cuda_sources=bmm_source,
    functions=["bmm_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return bmm.bmm_cuda(A, B)


def get_inputs():
    return [torch.randn(16, 128, 256).cuda(), torch.randn(16, 256, 128).cuda()]


def get_init_inputs():
    return []
