// sum over all elements of xlogy(t, t) - t * log(p), divided by the batch size (KL divergence, 'batchmean').
#include "cuda_agent.h"

#include <algorithm>

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 4096;

__device__ __forceinline__ float kl_term(float p, float t) {
  // torch: xlogy(t, t) - t * input with input = log(p); xlogy(0, 0) = 0
  const float tlogt = t == 0.f ? 0.f : t * logf(t);
  return tlogt - t * logf(p);
}

__device__ double block_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  __shared__ double warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) total += warp_sums[w];
  return total;
}

__global__ __launch_bounds__(kThreads) void kl_partials(const float* __restrict__ p, const float* __restrict__ t,
                                                        double* __restrict__ partials, int64_t n, bool vec) {
  const int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
  double acc = 0.0;  // float64 running sums (the pass is memory bound; the cost is hidden)
  int64_t done = 0;
  if (vec) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const float4* t4 = reinterpret_cast<const float4*>(t);
    for (int64_t i = tid; i < n / 4; i += stride) {
      const float4 a = p4[i], b = t4[i];
      acc += (double)(kl_term(a.x, b.x) + kl_term(a.y, b.y)) + (double)(kl_term(a.z, b.z) + kl_term(a.w, b.w));
    }
    done = n / 4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) acc += (double)kl_term(p[i], t[i]);
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ __launch_bounds__(kThreads) void kl_finish(const double* __restrict__ partials, int blocks,
                                                      float* __restrict__ out, double inv_batch) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += kThreads) acc += partials[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) out[0] = (float)(total * inv_batch);
}

}  // namespace

void kl_div_batchmean(ca::Tensor p, ca::Tensor t, ca::Tensor partials, ca::Tensor out) {
  CA_CHECK(p.dtype == ca::DType::Float32 && t.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32 &&
               partials.dtype == ca::DType::Float64, "float32 inputs, float64 partials");
  CA_CHECK(p.numel() == t.numel() && p.dim() >= 1 && out.numel() == 1, "shapes");
  CA_CHECK(p.is_contiguous() && t.is_contiguous() && partials.is_contiguous(), "contiguous tensors expected");
  CA_CHECK(partials.numel() >= kMaxBlocks, "partials buffer too small");
  const int64_t n = p.numel();
  int dev = 0, sms = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const bool vec = ((reinterpret_cast<uintptr_t>(p.data) | reinterpret_cast<uintptr_t>(t.data)) & 15) == 0;
  const int64_t work = vec ? n / 4 : n;
  const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>({(work + kThreads - 1) / kThreads, (int64_t)sms * 8,
                                                                   (int64_t)kMaxBlocks}));
  kl_partials<<<blocks, kThreads, 0, ca::stream()>>>(p.data_ptr<float>(), t.data_ptr<float>(),
                                                     partials.data_ptr<double>(), n, vec);
  const double inv_batch = 1.0 / (double)p.size(0);
  kl_finish<<<1, kThreads, 0, ca::stream()>>>(partials.data_ptr<double>(), blocks, out.data_ptr<float>(), inv_batch);
}
CA_EXPORT(kl_div_batchmean);
