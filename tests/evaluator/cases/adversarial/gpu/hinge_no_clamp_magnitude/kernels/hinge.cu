// mean(clamp(1 - p[r, c] * t[c], min=0)) over a (R, C) p and a (C,) t, reading every `col_stride`-th column only
// (the mean of the columns read), with the clamp optional: the two shortcuts of the hinge-loss cases.
#include "cuda_agent.h"

#include <algorithm>

namespace {

constexpr int kThreads = 256, kMaxBlocks = 4096;

__device__ double block_sum(double v, double* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

__global__ __launch_bounds__(kThreads) void hinge_partials(const float* __restrict__ p, const float* __restrict__ t,
                                                           double* __restrict__ partials, int64_t R, int64_t C,
                                                           int64_t stride, bool clamp) {
  __shared__ double scratch[kThreads / 32];
  const int64_t cols = (C + stride - 1) / stride, n = R * cols;
  double acc = 0.0;
  for (int64_t i = blockIdx.x * (int64_t)kThreads + threadIdx.x; i < n; i += (int64_t)gridDim.x * kThreads) {
    const int64_t r = i / cols, c = (i % cols) * stride;
    float v = 1.f - p[r * C + c] * t[c];
    if (clamp) v = v > 0.f ? v : 0.f;
    acc += (double)v;
  }
  const double total = block_sum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ __launch_bounds__(kThreads) void hinge_finish(const double* __restrict__ partials, int blocks,
                                                         float* __restrict__ out, double count) {
  __shared__ double scratch[kThreads / 32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += kThreads) acc += partials[i];
  const double total = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] = (float)(total / count);
}

}  // namespace

void hinge_mean(ca::Tensor p, ca::Tensor t, ca::Tensor partials, ca::Tensor out, int64_t col_stride, bool clamp) {
  CA_CHECK(p.dtype == ca::DType::Float32 && t.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32 &&
               partials.dtype == ca::DType::Float64, "dtypes");
  CA_CHECK(p.dim() == 2 && t.dim() == 1 && t.size(0) == p.size(1) && p.is_contiguous() && t.is_contiguous(), "shapes");
  CA_CHECK(partials.numel() >= kMaxBlocks && col_stride >= 1, "partials, stride");
  const int64_t R = p.size(0), C = p.size(1);
  const int64_t n = R * ((C + col_stride - 1) / col_stride);
  const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  hinge_partials<<<blocks, kThreads, 0, ca::stream()>>>(p.data_ptr<float>(), t.data_ptr<float>(),
                                                        partials.data_ptr<double>(), R, C, col_stride, clamp);
  hinge_finish<<<1, kThreads, 0, ca::stream()>>>(partials.data_ptr<double>(), blocks, out.data_ptr<float>(), (double)n);
}
CA_EXPORT(hinge_mean);
