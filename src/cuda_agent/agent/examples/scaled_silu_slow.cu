// Correct but slow on purpose: few threads, each walking a contiguous chunk, so neighbouring threads touch
// addresses far apart (uncoalesced) and most of the GPU sits idle.
#include "cuda_agent.h"

__global__ void scaled_silu_slow_kernel(const float* x, float* out, float scale, int64_t n, int64_t chunk) {
  int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  int64_t begin = t * chunk;
  int64_t end = begin + chunk < n ? begin + chunk : n;
  for (int64_t i = begin; i < end; ++i) {
    float v = x[i];
    out[i] = v / (1.0f + expf(-v)) * scale;
  }
}

void scaled_silu(ca::Tensor x, ca::Tensor out, double scale) {
  CA_CHECK(x.dtype == ca::DType::Float32 && x.is_contiguous(), "scaled_silu expects contiguous float32");
  CA_CHECK(out.numel() == x.numel(), "out must have as many elements as x");
  int64_t n = x.numel();
  const int threads = 128, blocks = 64;
  int64_t chunk = (n + threads * blocks - 1) / (threads * blocks);
  scaled_silu_slow_kernel<<<blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                 (float)scale, n, chunk);
}
CA_EXPORT(scaled_silu);
