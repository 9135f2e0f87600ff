// LayerNorm over the trailing N = weight.numel() elements of each of S samples (x contiguous, S * N elements).
#include "cuda_agent.h"

#include <algorithm>

constexpr int kThreads = 256;
constexpr int kBlocksPerSample = 128;

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// grid (kBlocksPerSample, S): block (c, s) sums a 1/kBlocksPerSample slice of sample s into sums[s] = (sum, sum sq).
__global__ void __launch_bounds__(kThreads) ln_partial_sums(const float* __restrict__ x, double* __restrict__ sums,
                                                            int64_t N) {
  const float* xs = x + (int64_t)blockIdx.y * N;
  double s1 = 0.0, s2 = 0.0;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < N; i += (int64_t)gridDim.x * kThreads) {
    const double v = xs[i];
    s1 += v;
    s2 += v * v;
  }
  __shared__ double p1[kThreads / 32], p2[kThreads / 32];
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  if ((threadIdx.x & 31) == 0) {
    p1[threadIdx.x >> 5] = s1;
    p2[threadIdx.x >> 5] = s2;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    s1 = threadIdx.x < kThreads / 32 ? p1[threadIdx.x] : 0.0;
    s2 = threadIdx.x < kThreads / 32 ? p2[threadIdx.x] : 0.0;
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (threadIdx.x == 0) {
      atomicAdd(sums + 2 * blockIdx.y, s1);
      atomicAdd(sums + 2 * blockIdx.y + 1, s2);
    }
  }
}

// stats[s] = (mean, 1 / sqrt(biased var + eps))
__global__ void ln_finalize(const double* __restrict__ sums, float* __restrict__ stats, int64_t S, int64_t N,
                            double eps) {
  const int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= S) return;
  const double mean = sums[2 * s] / (double)N;
  const double var = fmax(sums[2 * s + 1] / (double)N - mean * mean, 0.0);
  stats[2 * s] = (float)mean;
  stats[2 * s + 1] = (float)(1.0 / sqrt(var + eps));
}

__global__ void __launch_bounds__(kThreads) ln_apply_vec4(const float4* __restrict__ x, const float4* __restrict__ w,
                                                          const float4* __restrict__ b, const float* __restrict__ stats,
                                                          float4* __restrict__ y, int64_t n4) {
  const float mean = stats[2 * blockIdx.y], rstd = stats[2 * blockIdx.y + 1];
  const float4* xs = x + (int64_t)blockIdx.y * n4;
  float4* ys = y + (int64_t)blockIdx.y * n4;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n4; i += (int64_t)gridDim.x * kThreads) {
    const float4 v = xs[i], g = w[i], c = b[i];
    ys[i] = make_float4((v.x - mean) * rstd * g.x + c.x, (v.y - mean) * rstd * g.y + c.y,
                        (v.z - mean) * rstd * g.z + c.z, (v.w - mean) * rstd * g.w + c.w);
  }
}

__global__ void __launch_bounds__(kThreads) ln_apply_scalar(const float* __restrict__ x, const float* __restrict__ w,
                                                            const float* __restrict__ b,
                                                            const float* __restrict__ stats, float* __restrict__ y,
                                                            int64_t N) {
  const float mean = stats[2 * blockIdx.y], rstd = stats[2 * blockIdx.y + 1];
  const float* xs = x + (int64_t)blockIdx.y * N;
  float* ys = y + (int64_t)blockIdx.y * N;
  for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < N; i += (int64_t)gridDim.x * kThreads)
    ys[i] = (xs[i] - mean) * rstd * w[i] + b[i];
}

void layer_norm(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor y, ca::Tensor sums, ca::Tensor stats,
                double eps) {
  CA_CHECK(x.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 &&
               b.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(sums.dtype == ca::DType::Float64 && stats.dtype == ca::DType::Float32, "scratch dtypes");
  CA_CHECK(x.is_contiguous() && y.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors");
  const int64_t N = w.numel();
  CA_CHECK(N > 0 && b.numel() == N && x.numel() % N == 0 && y.numel() == x.numel(), "shapes do not match");
  const int64_t S = x.numel() / N;
  CA_CHECK(sums.numel() == 2 * S && stats.numel() == 2 * S, "scratch sizes");
  if (S == 0) return;
  CA_CHECK(S <= 65535, "too many samples for the grid's y dimension");
  cudaStream_t st = ca::stream();
  ln_partial_sums<<<dim3(kBlocksPerSample, (unsigned)S), kThreads, 0, st>>>(x.data_ptr<float>(),
                                                                              sums.data_ptr<double>(), N);
  ln_finalize<<<(unsigned)((S + 127) / 128), 128, 0, st>>>(sums.data_ptr<double>(), stats.data_ptr<float>(), S, N,
                                                           eps);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(y.data) |
                         reinterpret_cast<uintptr_t>(w.data) | reinterpret_cast<uintptr_t>(b.data);
  const int64_t per_sample_blocks = std::min<int64_t>(512, (N + kThreads - 1) / kThreads);
  if (N % 4 == 0 && (addr & 15) == 0) {
    ln_apply_vec4<<<dim3((unsigned)std::max<int64_t>(1, per_sample_blocks / 4), (unsigned)S), kThreads, 0, st>>>(
        reinterpret_cast<const float4*>(x.data), reinterpret_cast<const float4*>(w.data),
        reinterpret_cast<const float4*>(b.data), stats.data_ptr<float>(), reinterpret_cast<float4*>(y.data), N / 4);
  } else {
    ln_apply_scalar<<<dim3((unsigned)per_sample_blocks, (unsigned)S), kThreads, 0, st>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), stats.data_ptr<float>(), y.data_ptr<float>(),
        N);
  }
}
CA_EXPORT(layer_norm);
