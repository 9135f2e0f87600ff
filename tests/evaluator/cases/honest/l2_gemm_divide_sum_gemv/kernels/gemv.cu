// out[r] = factor * sum_k x[r, k] * v[k], v in float64, one 256-thread block per row, float64 accumulation.
#include "cuda_agent.h"

constexpr int kThreads = 256;

__global__ __launch_bounds__(kThreads) void gemv_rows(const float* __restrict__ x, const double* __restrict__ v,
                                                      float* __restrict__ out, int64_t K, double factor, bool vec) {
  const float* xr = x + (int64_t)blockIdx.x * K;
  double acc = 0.0;
  int64_t done = 0;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int64_t i = threadIdx.x; i < K / 4; i += kThreads) {
      const float4 a = x4[i];
      const double* w = v + 4 * i;
      acc = fma((double)a.x, w[0], acc);
      acc = fma((double)a.y, w[1], acc);
      acc = fma((double)a.z, w[2], acc);
      acc = fma((double)a.w, w[3], acc);
    }
    done = K / 4 * 4;
  }
  for (int64_t i = done + threadIdx.x; i < K; i += kThreads) acc = fma((double)xr[i], v[i], acc);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  __shared__ double warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    out[blockIdx.x] = (float)(total * factor);
  }
}

void scaled_gemv(ca::Tensor x, ca::Tensor v, ca::Tensor out, double factor) {
  CA_CHECK(x.dtype == ca::DType::Float32 && v.dtype == ca::DType::Float64 && out.dtype == ca::DType::Float32,
           "float32 x and out, float64 v expected");
  CA_CHECK(x.dim() == 2 && v.numel() == x.size(1) && out.numel() == x.size(0), "shapes");
  CA_CHECK(x.is_contiguous() && v.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  const int64_t M = x.size(0), K = x.size(1);
  if (M == 0) return;
  CA_CHECK(M <= 0x7fffffff, "too many rows");
  const bool vec = K % 4 == 0 && (reinterpret_cast<uintptr_t>(x.data) & 15) == 0;
  gemv_rows<<<(unsigned)M, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), v.data_ptr<double>(),
                                                         out.data_ptr<float>(), K, factor, vec);
}
CA_EXPORT(scaled_gemv);
