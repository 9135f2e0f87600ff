// Global average of a stride-1, unpadded ConvTranspose2d without computing it: every input pixel reaches every tap
// inside the output, so mean[n, co] = cbias[co] + inv_area * sum_ci wsum[ci, co] * S[n, ci], S the plane sums.
#include "cuda_agent.h"

#include <math_constants.h>

namespace {

constexpr int kThreads = 256;

__device__ double block_sum(double v, double* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += scratch[w];
  __syncthreads();
  return total;  // valid in thread 0
}

// S[p] = sum of plane p (HW values), one block per plane
__global__ __launch_bounds__(kThreads) void plane_sums(const float* __restrict__ x, double* __restrict__ S,
                                                       int64_t HW, bool vec) {
  __shared__ double scratch[kThreads / 32];
  const float* plane = x + (int64_t)blockIdx.x * HW;
  double acc = 0.0;
  int64_t done = 0;
  if (vec) {
    const float4* p4 = reinterpret_cast<const float4*>(plane);
    for (int64_t i = threadIdx.x; i < HW / 4; i += kThreads) {
      const float4 v = p4[i];
      acc += (double)((v.x + v.y) + (v.z + v.w));
    }
    done = HW / 4 * 4;
  }
  for (int64_t i = done + threadIdx.x; i < HW; i += kThreads) acc += (double)plane[i];
  const double total = block_sum(acc, scratch);
  if (threadIdx.x == 0) S[blockIdx.x] = total;
}

// out[n] = 10 * logsumexp_co(cbias[co] + inv_area * sum_ci wsum[ci, co] * S[n, ci]); one block per sample
__global__ __launch_bounds__(kThreads) void gap_lse(const double* __restrict__ S, const double* __restrict__ wsum,
                                                    const double* __restrict__ cbias, float* __restrict__ out,
                                                    int Cin, int Cout, double inv_area, double multiplier) {
  __shared__ double scratch[kThreads / 32];
  __shared__ double zmax;
  const double* s = S + (int64_t)blockIdx.x * Cin;
  double local_max = -CUDART_INF;
  for (int co = threadIdx.x; co < Cout; co += kThreads) {
    double acc = 0.0;
    for (int ci = 0; ci < Cin; ++ci) acc = fma(wsum[(int64_t)ci * Cout + co], s[ci], acc);
    local_max = fmax(local_max, cbias[co] + inv_area * acc);
  }
  // block max
  for (int off = 16; off > 0; off >>= 1) local_max = fmax(local_max, __shfl_xor_sync(0xffffffffu, local_max, off));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = local_max;
  __syncthreads();
  if (threadIdx.x == 0) {
    double m = -CUDART_INF;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) m = fmax(m, scratch[w]);
    zmax = m;
  }
  __syncthreads();
  const double m = zmax;
  double local_sum = 0.0;
  for (int co = threadIdx.x; co < Cout; co += kThreads) {  // recomputed: Cin * Cout is tiny
    double acc = 0.0;
    for (int ci = 0; ci < Cin; ++ci) acc = fma(wsum[(int64_t)ci * Cout + co], s[ci], acc);
    local_sum += exp(cbias[co] + inv_area * acc - m);
  }
  const double total = block_sum(local_sum, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = (float)(multiplier * (m + log(total)));
}

}  // namespace

void convt_gap_lse(ca::Tensor x, ca::Tensor wsum, ca::Tensor cbias, ca::Tensor plane, ca::Tensor out, int64_t kernel,
                   double multiplier) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "float32 input and output expected");
  CA_CHECK(wsum.dtype == ca::DType::Float64 && cbias.dtype == ca::DType::Float64 && plane.dtype == ca::DType::Float64,
           "float64 folded weights and scratch expected");
  CA_CHECK(x.dim() == 4 && x.is_contiguous(), "contiguous (N, C, H, W) input expected");
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  CA_CHECK(wsum.dim() == 2 && wsum.size(0) == Cin && wsum.is_contiguous(), "wsum must be (Cin, Cout)");
  const int64_t Cout = wsum.size(1);
  CA_CHECK(cbias.numel() == Cout && plane.numel() >= N * Cin && out.numel() == N, "shapes");
  if (N == 0) return;
  CA_CHECK(N * Cin <= 0x7fffffff && N <= 0x7fffffff, "too many planes");
  const int64_t HW = H * W;
  const bool vec = HW % 4 == 0 && (reinterpret_cast<uintptr_t>(x.data) & 15) == 0;
  plane_sums<<<(unsigned)(N * Cin), kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), plane.data_ptr<double>(), HW, vec);
  const double area = (double)(H + kernel - 1) * (double)(W + kernel - 1);
  gap_lse<<<(unsigned)N, kThreads, 0, ca::stream()>>>(plane.data_ptr<double>(), wsum.data_ptr<double>(),
                                                      cbias.data_ptr<double>(), out.data_ptr<float>(), (int)Cin,
                                                      (int)Cout, 1.0 / area, multiplier);
}
CA_EXPORT(convt_gap_lse);
