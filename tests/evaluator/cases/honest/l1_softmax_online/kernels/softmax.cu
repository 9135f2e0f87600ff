// softmax(x, dim=1) for a 2-D float32 tensor. One block per row:
//   pass 1: each thread keeps an online (max, sum of exp(x - max)) over its strided elements; the block combines
//           the pairs with warp shuffles, then across warps through shared memory;
//   pass 2: y = exp(x - max) * (1 / sum).
// float4 accesses when the row length is a multiple of 4 and the pointers are 16-byte aligned; scalar otherwise.
#include "cuda_agent.h"

#include <cmath>

constexpr int kThreads = 1024;

// Merge the partial (m2, s2) into (m, s); s is a sum of exp(v - m). An empty partial has m == -inf.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
  } else if (m2 > m) {
    s = s * expf(m - m2) + s2;
    m = m2;
  } else {
    s += s2 * expf(m2 - m);
  }
}

__device__ __forceinline__ void block_max_sum(float& m, float& s) {
  __shared__ float sm[32], ss[32];
  for (int off = 16; off > 0; off >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    merge(m, s, m2, s2);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    const int nwarps = blockDim.x >> 5;
    m = lane < nwarps ? sm[lane] : -INFINITY;
    s = lane < nwarps ? ss[lane] : 0.f;
    for (int off = 16; off > 0; off >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
      merge(m, s, m2, s2);
    }
    if (lane == 0) {
      sm[0] = m;
      ss[0] = s;
    }
  }
  __syncthreads();
  m = sm[0];
  s = ss[0];
}

// __launch_bounds__ written after __global__ and before the return type.
__global__ __launch_bounds__(kThreads) void softmax_rows_vec4(const float* __restrict__ x, float* __restrict__ y,
                                                              int64_t cols) {
  const int64_t row = blockIdx.x;
  const float4* xr = reinterpret_cast<const float4*>(x + row * cols);
  float4* yr = reinterpret_cast<float4*>(y + row * cols);
  const int64_t n4 = cols / 4;
  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
    const float4 v = xr[i];
    merge(m, s, v.x, 1.f);
    merge(m, s, v.y, 1.f);
    merge(m, s, v.z, 1.f);
    merge(m, s, v.w, 1.f);
  }
  block_max_sum(m, s);
  const float inv = 1.f / s;
  for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
    const float4 v = xr[i];
    yr[i] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
  }
}

__global__ __launch_bounds__(kThreads) void softmax_rows_scalar(const float* __restrict__ x, float* __restrict__ y,
                                                                int64_t cols) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) merge(m, s, xr[i], 1.f);
  block_max_sum(m, s);
  const float inv = 1.f / s;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(xr[i] - m) * inv;
}

void softmax(ca::Tensor x, ca::Tensor y) {
  CA_CHECK(x.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32, "softmax expects float32");
  CA_CHECK(x.dim() == 2 && y.dim() == 2 && x.size(0) == y.size(0) && x.size(1) == y.size(1),
           "softmax expects 2-D tensors of one shape");
  CA_CHECK(x.is_contiguous() && y.is_contiguous(), "softmax expects contiguous tensors");
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  CA_CHECK(rows <= 0x7fffffff, "too many rows for one grid");
  const bool vec = cols % 4 == 0 &&
                   ((reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(y.data)) & 15) == 0;
  if (vec) {
    softmax_rows_vec4<<<(unsigned)rows, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
  } else {
    softmax_rows_scalar<<<(unsigned)rows, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                       cols);
  }
}
CA_EXPORT(softmax);
