#include "cuda_agent.h"

constexpr int TILE = 32;

// C[M,N] = A[M,K] @ B[K,N] with shared-memory tiles; bounds checked on every edge.
__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                             int64_t M, int64_t K, int64_t N) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  int64_t row = blockIdx.y * TILE + threadIdx.y;
  int64_t col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int64_t t = 0; t < K; t += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? A[row * K + t + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (t + threadIdx.y < K && col < N) ? B[(t + threadIdx.y) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

void matmul(ca::Tensor a, ca::Tensor b, ca::Tensor out) {
  CA_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "matmul expects [M,K] @ [K,N]");
  CA_CHECK(a.is_contiguous() && b.is_contiguous(), "matmul expects contiguous inputs");
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  dim3 block(TILE, TILE);
  dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
  matmul_tiled<<<grid, block, 0, ca::stream()>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), M, K, N);
}
CA_EXPORT(matmul);
