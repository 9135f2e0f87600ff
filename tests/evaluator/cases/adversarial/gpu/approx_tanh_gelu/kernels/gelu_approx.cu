// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with tanh.approx.f32 (about 11 correct bits).
#include "cuda_agent.h"

#include <algorithm>

__device__ __forceinline__ float tanh_approx(float v) {
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}

__device__ __forceinline__ float gelu(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.f + tanh_approx(k * (x + 0.044715f * x * x * x)));
}

__global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    const float4 v = x[i];
    y[i] = make_float4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w));
  }
}

__global__ void gelu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t begin, int64_t n) {
  const int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu(x[i]);
}

void gelu_fast(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32 && x.numel() == out.numel(), "float32");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  const int64_t n = x.numel();
  const bool vec = ((reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(out.data)) & 15) == 0;
  const int64_t n4 = vec ? n / 4 : 0;
  if (n4 > 0)
    gelu_vec4<<<(int)std::min<int64_t>((n4 + 255) / 256, 132 * 16), 256, 0, ca::stream()>>>(
        reinterpret_cast<const float4*>(x.data), reinterpret_cast<float4*>(out.data), n4);
  const int64_t rest = n - n4 * 4;
  if (rest > 0)
    gelu_tail<<<(unsigned)((rest + 255) / 256), 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                       n4 * 4, n);
}
CA_EXPORT(gelu_fast);
