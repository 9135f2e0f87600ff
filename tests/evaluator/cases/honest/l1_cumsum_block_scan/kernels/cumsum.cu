// Inclusive prefix sum along the last dimension of a contiguous float32 tensor (rows x L).
#include "cuda_agent.h"

template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS) cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                              int64_t L) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, one block");
  constexpr int kWarps = THREADS / 32;
  __shared__ float warp_tot[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* xr = x + (int64_t)blockIdx.x * L;
  float* yr = y + (int64_t)blockIdx.x * L;
  float carry = 0.f;  // sum of all previous tiles of this row
  for (int64_t tile = 0; tile < L; tile += (int64_t)THREADS * ITEMS) {
    const int64_t first = tile + (int64_t)threadIdx.x * ITEMS;
    float v[ITEMS];
    float run = 0.f;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      v[j] = first + j < L ? xr[first + j] : 0.f;
      run += v[j];
      v[j] = run;  // inclusive prefix within the thread
    }
    // inclusive scan of the thread totals within the warp
    float scan = run;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, scan, off);
      if (lane >= off) scan += up;
    }
    if (lane == 31) warp_tot[warp] = scan;
    __syncthreads();
    if (warp == 0) {
      float t = lane < kWarps ? warp_tot[lane] : 0.f;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float up = __shfl_up_sync(0xffffffffu, t, off);
        if (lane >= off) t += up;
      }
      if (lane < kWarps) warp_tot[lane] = t;  // inclusive scan of warp totals
    }
    __syncthreads();
    const float before = carry + (warp > 0 ? warp_tot[warp - 1] : 0.f) + (scan - run);
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      if (first + j < L) yr[first + j] = before + v[j];
    }
    carry += warp_tot[kWarps - 1];
    __syncthreads();  // warp_tot is rewritten by the next tile
  }
}

void cumsum_last_dim(ca::Tensor x, ca::Tensor y) {
  CA_CHECK(x.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == y.numel() && x.dim() >= 1,
           "contiguous tensors of one size expected");
  const int64_t L = x.size(-1);
  if (x.numel() == 0) return;
  const int64_t rows = x.numel() / L;
  CA_CHECK(rows <= 0x7fffffff, "too many rows");
  cumsum_rows_kernel<512, 8><<<(unsigned)rows, 512, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), L);
}
CA_EXPORT(cumsum_last_dim);
