// mean(clamp(1 - predictions * targets, min=0)), targets broadcast along the last dimension of predictions.
// Pass 1: a grid-stride loop with float4 loads; each block reduces its threads (warp shuffles, then shared
// memory) and writes one partial sum. Pass 2: one block adds the partials in double and divides by the count.
#include "cuda_agent.h"

template <int THREADS>
__device__ float block_sum(float v) {
  __shared__ float warp_sums[THREADS / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffff, v, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.f;
  if (threadIdx.x < 32) {
    total = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.f;
    for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffff, total, off);
  }
  return total;
}

template <int THREADS>
__global__ void hinge_partial(const float* __restrict__ pred, const float* __restrict__ tgt, float* __restrict__ partial,
                              int64_t n, int64_t last, int64_t tcount, bool vec4) {
  float acc = 0.f;
  const int64_t stride = (int64_t)gridDim.x * THREADS;
  const int64_t start = blockIdx.x * (int64_t)THREADS + threadIdx.x;
  if (vec4) {
    const float4* p4 = reinterpret_cast<const float4*>(pred);
    for (int64_t i = start; i < n / 4; i += stride) {
      const float4 p = p4[i];
      const int64_t j = (i * 4) % last;
      const float t0 = tgt[tcount == 1 ? 0 : j], t1 = tgt[tcount == 1 ? 0 : j + 1];
      const float t2 = tgt[tcount == 1 ? 0 : j + 2], t3 = tgt[tcount == 1 ? 0 : j + 3];
      acc += fmaxf(1.f - p.x * t0, 0.f) + fmaxf(1.f - p.y * t1, 0.f) + fmaxf(1.f - p.z * t2, 0.f) +
             fmaxf(1.f - p.w * t3, 0.f);
    }
  } else {
    for (int64_t i = start; i < n; i += stride) {
      const float t = tgt[tcount == 1 ? 0 : i % last];
      acc += fmaxf(1.f - pred[i] * t, 0.f);
    }
  }
  const float total = block_sum<THREADS>(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

template <int THREADS>
__global__ void hinge_final(const float* __restrict__ partial, int64_t count, float* __restrict__ out, int64_t n) {
  __shared__ double sums[THREADS];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += THREADS) acc += partial[i];
  sums[threadIdx.x] = acc;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sums[threadIdx.x] += sums[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = (float)(sums[0] / (double)n);
}

constexpr int kThreads = 512;

void hinge_forward(ca::Tensor pred, ca::Tensor tgt, ca::Tensor partial, ca::Tensor out) {
  CA_CHECK(pred.dtype == ca::DType::Float32 && tgt.dtype == ca::DType::Float32, "hinge loss expects float32 inputs");
  CA_CHECK(partial.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "buffers must be float32");
  CA_CHECK(pred.is_contiguous() && tgt.is_contiguous(), "hinge loss expects contiguous inputs");
  CA_CHECK(pred.dim() >= 1, "predictions must have at least one dimension");
  const int64_t n = pred.numel();
  const int64_t last = pred.size(-1);
  const int64_t tcount = tgt.numel();
  CA_CHECK(tcount == last || tcount == 1, "targets must broadcast along the last dimension of predictions");
  CA_CHECK(out.numel() == 1, "output must hold one value");
  const int64_t blocks = partial.numel();
  CA_CHECK(blocks >= 1, "need at least one partial-sum slot");
  const bool vec4 = last % 4 == 0 && (uintptr_t)pred.data % 16 == 0 && tcount != 1;
  hinge_partial<kThreads><<<(unsigned)blocks, kThreads, 0, ca::stream()>>>(
      pred.data_ptr<float>(), tgt.data_ptr<float>(), partial.data_ptr<float>(), n, last, tcount, vec4);
  hinge_final<256><<<1, 256, 0, ca::stream()>>>(partial.data_ptr<float>(), blocks, out.data_ptr<float>(), n);
}
CA_EXPORT(hinge_forward);
