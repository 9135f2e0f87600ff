// y[m] = sum_k A[m, k] * x[k] for A (M, K) and x (K, 1), both contiguous float32. One 256-thread block per row.
#include "cuda_agent.h"

constexpr int kThreads = 256;

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_part[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_part[threadIdx.x] : 0.f;
  if (warp == 0) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  }
  return v;  // valid in thread 0
}

extern "C" __global__ void __launch_bounds__(kThreads)
matvec_rows_vec4(const float* __restrict__ A,
                 const float* __restrict__ x,
                 float* __restrict__ y,
                 long long cols)
{
  const long long row = blockIdx.x;
  const float4* a4 = reinterpret_cast<const float4*>(A + row * cols);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const long long n4 = cols / 4;
  float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  for (long long i = threadIdx.x; i < n4; i += kThreads) {
    const float4 a = a4[i], b = x4[i];
    s0 = fmaf(a.x, b.x, s0);
    s1 = fmaf(a.y, b.y, s1);
    s2 = fmaf(a.z, b.z, s2);
    s3 = fmaf(a.w, b.w, s3);
  }
  for (long long i = n4 * 4 + threadIdx.x; i < cols; i += kThreads) s0 = fmaf(A[row * cols + i], x[i], s0);
  const float total = block_sum((s0 + s1) + (s2 + s3));
  if (threadIdx.x == 0) y[row] = total;
}

extern "C" __global__ void __launch_bounds__(kThreads)
matvec_rows_scalar(const float* __restrict__ A,
                   const float* __restrict__ x,
                   float* __restrict__ y,
                   long long cols)
{
  const long long row = blockIdx.x;
  float s = 0.f;
  for (long long i = threadIdx.x; i < cols; i += kThreads) s = fmaf(A[row * cols + i], x[i], s);
  const float total = block_sum(s);
  if (threadIdx.x == 0) y[row] = total;
}

void matvec(ca::Tensor A, ca::Tensor x, ca::Tensor y) {
  CA_CHECK(A.dtype == ca::DType::Float32 && x.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32,
           "float32 expected");
  CA_CHECK(A.dim() == 2 && x.dim() == 2 && x.size(1) == 1 && x.size(0) == A.size(1), "A (M, K) and x (K, 1)");
  CA_CHECK(y.numel() == A.size(0), "y must hold M values");
  CA_CHECK(A.is_contiguous() && x.is_contiguous() && y.is_contiguous(), "contiguous tensors expected");
  const long long rows = A.size(0), cols = A.size(1);
  if (rows == 0) return;
  CA_CHECK(rows <= 0x7fffffffLL, "too many rows");
  const bool vec = cols % 4 == 0 &&
                   ((reinterpret_cast<uintptr_t>(A.data) | reinterpret_cast<uintptr_t>(x.data)) & 15) == 0;
  if (vec) {
    matvec_rows_vec4<<<(unsigned)rows, kThreads, 0, ca::stream()>>>(A.data_ptr<float>(), x.data_ptr<float>(),
                                                                    y.data_ptr<float>(), cols);
  } else {
    matvec_rows_scalar<<<(unsigned)rows, kThreads, 0, ca::stream()>>>(A.data_ptr<float>(), x.data_ptr<float>(),
                                                                      y.data_ptr<float>(), cols);
  }
}
CA_EXPORT(matvec);
