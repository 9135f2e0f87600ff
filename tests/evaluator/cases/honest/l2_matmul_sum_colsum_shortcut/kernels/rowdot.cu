// out[r] = sum_k x[r, k] * v[k] + c[0]: one 256-thread block per row, float4 loads when aligned, warp shuffles.
#include "cuda_agent.h"

constexpr int kThreads = 256;

__global__ __launch_bounds__(kThreads) void rowdot_kernel(const float* __restrict__ x, const float* __restrict__ v,
                                                          const float* __restrict__ c, float* __restrict__ out,
                                                          int64_t K, bool vec) {
  const float* xr = x + (int64_t)blockIdx.x * K;
  float acc = 0.f;
  int64_t begin = 0;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const float4* v4 = reinterpret_cast<const float4*>(v);
    for (int64_t i = threadIdx.x; i < K / 4; i += kThreads) {
      const float4 a = x4[i], b = v4[i];
      acc = fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, fmaf(a.w, b.w, acc))));
    }
    begin = K / 4 * 4;
  }
  for (int64_t i = begin + threadIdx.x; i < K; i += kThreads) acc = fmaf(xr[i], v[i], acc);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
    out[blockIdx.x] = total + c[0];
  }
}

void rowdot_plus_scalar(ca::Tensor x, ca::Tensor v, ca::Tensor c, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && v.dtype == ca::DType::Float32 && c.dtype == ca::DType::Float32 &&
               out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 2 && v.numel() == x.size(1) && c.numel() == 1 && out.numel() == x.size(0), "shapes");
  CA_CHECK(x.is_contiguous() && v.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  const int64_t M = x.size(0), K = x.size(1);
  if (M == 0) return;
  CA_CHECK(M <= 0x7fffffff, "too many rows");
  const bool vec = K % 4 == 0 && ((reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(v.data)) & 15) == 0;
  rowdot_kernel<<<(unsigned)M, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), v.data_ptr<float>(),
                                                            c.data_ptr<float>(), out.data_ptr<float>(), K, vec);
}
CA_EXPORT(rowdot_plus_scalar);
