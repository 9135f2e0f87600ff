// One fused pass: 128-bit vector loads and stores, a grid-stride loop sized to the GPU, a scalar tail.
#include "cuda_agent.h"

__device__ __forceinline__ float silu_scaled(float v, float scale) { return v / (1.0f + __expf(-v)) * scale; }

__global__ void scaled_silu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ out, float scale,
                                        int64_t n4) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x[i];
    v.x = silu_scaled(v.x, scale);
    v.y = silu_scaled(v.y, scale);
    v.z = silu_scaled(v.z, scale);
    v.w = silu_scaled(v.w, scale);
    out[i] = v;
  }
}

__global__ void scaled_silu_tail_kernel(const float* __restrict__ x, float* __restrict__ out, float scale,
                                        int64_t begin, int64_t n) {
  int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = silu_scaled(x[i], scale);
}

void scaled_silu(ca::Tensor x, ca::Tensor out, double scale) {
  CA_CHECK(x.dtype == ca::DType::Float32 && x.is_contiguous(), "scaled_silu expects contiguous float32");
  CA_CHECK(out.numel() == x.numel() && out.is_contiguous(), "out must be contiguous, as large as x");
  int64_t n = x.numel();
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(op) % 16 == 0);
  int64_t n4 = aligned ? n / 4 : 0;
  const int threads = 256;
  if (n4 > 0) {
    int64_t blocks = (n4 + threads - 1) / threads;
    if (blocks > 132 * 16) blocks = 132 * 16;
    scaled_silu_vec4_kernel<<<(unsigned)blocks, threads, 0, ca::stream()>>>(
        reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(op), (float)scale, n4);
  }
  int64_t rest = n - n4 * 4;
  if (rest > 0) {
    int64_t blocks = (rest + threads - 1) / threads;
    scaled_silu_tail_kernel<<<(unsigned)blocks, threads, 0, ca::stream()>>>(xp, op, (float)scale, n4 * 4, n);
  }
}
CA_EXPORT(scaled_silu);
