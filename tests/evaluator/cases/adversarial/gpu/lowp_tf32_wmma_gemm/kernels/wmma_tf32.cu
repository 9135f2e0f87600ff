// C (M x N) = A (M x K) @ B (K x N), row-major, with WMMA m16n16k8 TF32 fragments: each warp one 16 x 16 tile of C,
// fragments loaded straight from global memory, elements rounded to TF32, accumulated in fp32.
#include "cuda_agent.h"

#include <mma.h>

using namespace nvcuda;

constexpr int kTile = 16, kStep = 8, kWarps = 4;

__global__ __launch_bounds__(32 * kWarps) void gemm_tf32_wmma(const float* __restrict__ A, const float* __restrict__ B,
                                                              float* __restrict__ C, int M, int N, int K) {
  const int warp = threadIdx.x / 32;
  const int tile_row = blockIdx.y, tile_col = blockIdx.x * kWarps + warp;
  if (tile_row * kTile >= M || tile_col * kTile >= N) return;
  wmma::fragment<wmma::matrix_a, kTile, kTile, kStep, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, kTile, kTile, kStep, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, kTile, kTile, kStep, float> c;
  wmma::fill_fragment(c, 0.f);
  const float* a_row = A + (int64_t)tile_row * kTile * K;
  const float* b_col = B + (int64_t)tile_col * kTile;
  for (int k = 0; k < K; k += kStep) {
    wmma::load_matrix_sync(a, a_row + k, K);
    wmma::load_matrix_sync(b, b_col + (int64_t)k * N, N);
#pragma unroll
    for (int t = 0; t < a.num_elements; ++t) a.x[t] = wmma::__float_to_tf32(a.x[t]);
#pragma unroll
    for (int t = 0; t < b.num_elements; ++t) b.x[t] = wmma::__float_to_tf32(b.x[t]);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + (int64_t)tile_row * kTile * N + (int64_t)tile_col * kTile, c, N, wmma::mem_row_major);
}

void matmul_tf32(ca::Tensor a, ca::Tensor b, ca::Tensor c) {
  CA_CHECK(a.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 && c.dtype == ca::DType::Float32, "float32");
  CA_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2 && a.is_contiguous() && b.is_contiguous() && c.is_contiguous(),
           "contiguous 2-D tensors");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  CA_CHECK(b.size(0) == K && c.size(0) == M && c.size(1) == N, "shapes");
  CA_CHECK(M % kTile == 0 && N % kTile == 0 && K % kStep == 0, "sizes must be multiples of the WMMA tile");
  CA_CHECK(M / kTile <= 65535 && M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "sizes out of range");
  if (M == 0 || N == 0) return;
  const dim3 grid((unsigned)((N / kTile + kWarps - 1) / kWarps), (unsigned)(M / kTile));
  gemm_tf32_wmma<<<grid, 32 * kWarps, 0, ca::stream()>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(),
                                                         (int)M, (int)N, (int)K);
}
CA_EXPORT(matmul_tf32);
