// out = x / sqrt(sum(x^2)), x contiguous float32 of any size (64-bit indices).
#include "cuda_agent.h"

#include <algorithm>

#define THREADS 256
// Every kernel here is a grid-stride kernel of THREADS threads; the macro spells the declaration once.
#define GRID_STRIDE_KERNEL(name) extern "C" __global__ void __launch_bounds__(THREADS) name

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

GRID_STRIDE_KERNEL(sum_squares_kernel)(const float* __restrict__ x, double* __restrict__ acc, long long n, int vec) {
  const long long tid = (long long)blockIdx.x * THREADS + threadIdx.x;
  const long long stride = (long long)gridDim.x * THREADS;
  double s = 0.0;
  long long done = 0;
  if (vec) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = n / 4;
    for (long long i = tid; i < n4; i += stride) {
      const float4 v = x4[i];
      s += (double)v.x * v.x + (double)v.y * v.y + (double)v.z * v.z + (double)v.w * v.w;
    }
    done = n4 * 4;
  }
  for (long long i = done + tid; i < n; i += stride) s += (double)x[i] * x[i];
  __shared__ double part[THREADS / 32];
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < THREADS / 32 ? part[threadIdx.x] : 0.0;
    s = warp_sum(s);
    if (threadIdx.x == 0) atomicAdd(acc, s);
  }
}

GRID_STRIDE_KERNEL(divide_vec4_kernel)(const float4* __restrict__ x, float4* __restrict__ y,
                                       const double* __restrict__ acc, long long n4) {
  const float norm = (float)sqrt(*acc);
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n4; i += (long long)gridDim.x * THREADS) {
    const float4 v = x[i];
    y[i] = make_float4(v.x / norm, v.y / norm, v.z / norm, v.w / norm);
  }
}

GRID_STRIDE_KERNEL(divide_tail_kernel)(const float* __restrict__ x, float* __restrict__ y,
                                       const double* __restrict__ acc, long long begin, long long n) {
  const float norm = (float)sqrt(*acc);
  for (long long i = begin + (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * THREADS)
    y[i] = x[i] / norm;
}

static unsigned grid_for(long long work) {
  int device = 0, sms = 132;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return (unsigned)std::max<long long>(1, std::min<long long>((work + THREADS - 1) / THREADS, (long long)sms * 32));
}

void frobenius_normalize(ca::Tensor x, ca::Tensor out, ca::Tensor acc) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(acc.dtype == ca::DType::Float64 && acc.numel() == 1, "a zeroed float64 accumulator expected");
  CA_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == out.numel(), "contiguous tensors of one size");
  const long long n = x.numel();
  if (n == 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(out.data)) & 15) == 0;
  cudaStream_t s = ca::stream();
  double* a = acc.data_ptr<double>();
  sum_squares_kernel<<<grid_for(aligned ? n / 4 : n), THREADS, 0, s>>>(x.data_ptr<float>(), a, n, aligned ? 1 : 0);
  const long long n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    divide_vec4_kernel<<<grid_for(n4), THREADS, 0, s>>>(reinterpret_cast<const float4*>(x.data),
                                                        reinterpret_cast<float4*>(out.data), a, n4);
  }
  if (n4 * 4 < n) {
    divide_tail_kernel<<<grid_for(n - n4 * 4), THREADS, 0, s>>>(x.data_ptr<float>(), out.data_ptr<float>(), a,
                                                                n4 * 4, n);
  }
}
CA_EXPORT(frobenius_normalize);
