// Row softmax: one block per row. Pass 1 keeps a running (max, sum of exp) per thread (online softmax) and merges
// them across the block; pass 2 writes exp(x - max) / sum. Two reads and one write of each element.
#include "cuda_agent.h"
#include <cfloat>

struct MaxSum {
  float m;
  float s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.m == -INFINITY) return b;
  if (b.m == -INFINITY) return a;
  float m = fmaxf(a.m, b.m);
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ MaxSum add(MaxSum a, float v) {
  if (v > a.m) return {v, a.s * __expf(a.m - v) + 1.f};
  return {a.m, a.s + __expf(v - a.m)};
}

template <int THREADS>
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols, bool vec4) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  MaxSum acc{-INFINITY, 0.f};
  if (vec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int64_t i = threadIdx.x; i < cols / 4; i += THREADS) {
      float4 v = x4[i];
      acc = add(add(add(add(acc, v.x), v.y), v.z), v.w);
    }
  } else {
    for (int64_t i = threadIdx.x; i < cols; i += THREADS) acc = add(acc, xr[i]);
  }
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffff, acc.m, off), __shfl_xor_sync(0xffffffff, acc.s, off)};
    acc = merge(acc, other);
  }
  __shared__ MaxSum warp_acc[THREADS / 32];
  __shared__ MaxSum total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_acc[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    MaxSum v = lane < THREADS / 32 ? warp_acc[lane] : MaxSum{-INFINITY, 0.f};
    for (int off = 16; off > 0; off >>= 1) {
      MaxSum other{__shfl_xor_sync(0xffffffff, v.m, off), __shfl_xor_sync(0xffffffff, v.s, off)};
      v = merge(v, other);
    }
    if (lane == 0) total = v;
  }
  __syncthreads();
  const float m = total.m;
  const float inv = 1.f / total.s;
  if (vec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int64_t i = threadIdx.x; i < cols / 4; i += THREADS) {
      float4 v = x4[i];
      v.x = __expf(v.x - m) * inv; v.y = __expf(v.y - m) * inv; v.z = __expf(v.z - m) * inv; v.w = __expf(v.w - m) * inv;
      y4[i] = v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < cols; i += THREADS) yr[i] = __expf(xr[i] - m) * inv;
  }
}

void softmax_forward(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "softmax expects float32 tensors");
  CA_CHECK(x.dim() == 2, "softmax expects a 2-D input (batch, features)");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "softmax expects contiguous tensors");
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  CA_CHECK(rows <= 2147483647LL, "too many rows for one launch");
  const bool vec4 = cols % 4 == 0 && (uintptr_t)x.data % 16 == 0 && (uintptr_t)out.data % 16 == 0;
  constexpr int kThreads = 1024;
  softmax_rows<kThreads><<<(unsigned)rows, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                          cols, vec4);
}
CA_EXPORT(softmax_forward);
