// Cross-entropy mean estimated on rows 0, S, 2S, ... (two passes per sampled row: max, then sum of exp).
#include "cuda_agent.h"

#include <math_constants.h>

namespace {

constexpr int kThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  __syncthreads();
  return r;
}

__global__ __launch_bounds__(kThreads) void ce_rows(const float* __restrict__ x, const int64_t* __restrict__ t,
                                                    float* __restrict__ loss, int64_t C, int64_t stride) {
  __shared__ float scratch[kThreads / 32];
  const int64_t row = (int64_t)blockIdx.x * stride;
  const float* xr = x + row * C;
  float m = -CUDART_INF_F;
  for (int64_t i = threadIdx.x; i < C; i += kThreads) m = fmaxf(m, xr[i]);
  m = block_reduce(m, true, scratch);
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < C; i += kThreads) s += expf(xr[i] - m);
  s = block_reduce(s, false, scratch);
  if (threadIdx.x == 0) loss[blockIdx.x] = m + logf(s) - xr[t[row]];
}

__global__ void mean_of(const float* __restrict__ loss, int64_t n, float* __restrict__ out) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += loss[i];
  __shared__ double s[256];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = (float)(s[0] / (double)n);
}

}  // namespace

void sampled_cross_entropy(ca::Tensor x, ca::Tensor t, ca::Tensor loss, ca::Tensor out, int64_t stride) {
  CA_CHECK(x.dtype == ca::DType::Float32 && t.dtype == ca::DType::Int64 && x.dim() == 2 && x.is_contiguous(), "x, t");
  const int64_t N = x.size(0), C = x.size(1), rows = (N + stride - 1) / stride;
  CA_CHECK(loss.numel() >= rows && rows > 0, "loss buffer");
  ce_rows<<<(unsigned)rows, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), t.data_ptr<int64_t>(),
                                                         loss.data_ptr<float>(), C, stride);
  mean_of<<<1, 256, 0, ca::stream()>>>(loss.data_ptr<float>(), rows, out.data_ptr<float>());
}
CA_EXPORT(sampled_cross_entropy);
