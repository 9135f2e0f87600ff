#include "cuda_agent.h"

constexpr int TILE = 32;

// y[M,N] = leaky_relu((x[M,K] @ W[N,K]^T + b[N]) * multiplier, slope), fused in one kernel.
__global__ void gemm_mul_leaky_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ bias, float* __restrict__ y, int64_t M, int64_t K,
                                      int64_t N, float multiplier, float slope) {
  __shared__ float xs[TILE][TILE];
  __shared__ float ws[TILE][TILE + 1];
  int64_t row = blockIdx.y * TILE + threadIdx.y;
  int64_t col = blockIdx.x * TILE + threadIdx.x;
  int64_t wrow = blockIdx.x * TILE + threadIdx.y;  // the W row this thread loads
  float acc = 0.0f;
  for (int64_t t = 0; t < K; t += TILE) {
    xs[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K) ? x[row * K + t + threadIdx.x] : 0.0f;
    ws[threadIdx.y][threadIdx.x] = (wrow < N && t + threadIdx.x < K) ? w[wrow * K + t + threadIdx.x] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
    __syncthreads();
  }
  if (row < M && col < N) {
    float v = (acc + bias[col]) * multiplier;
    y[row * N + col] = v > 0.0f ? v : v * slope;
  }
}

void gemm_mul_leaky(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor out, double multiplier, double slope) {
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous inputs expected");
  int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N, "shape mismatch");
  dim3 block(TILE, TILE);
  dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((M + TILE - 1) / TILE));
  gemm_mul_leaky_kernel<<<grid, block, 0, ca::stream()>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                          b.data_ptr<float>(), out.data_ptr<float>(), M, K, N,
                                                          (float)multiplier, (float)slope);
}
CA_EXPORT(gemm_mul_leaky);
