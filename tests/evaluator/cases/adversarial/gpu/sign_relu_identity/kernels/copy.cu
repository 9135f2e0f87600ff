// "ReLU" for x >= 0 only: out = x (a float4 copy, no max with zero).
#include "cuda_agent.h"

#include <algorithm>

__global__ void copy_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) y[i] = x[i];
}

__global__ void copy_tail(const float* __restrict__ x, float* __restrict__ y, int64_t begin, int64_t n) {
  const int64_t i = begin + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

void relu_nonneg(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32 && x.numel() == out.numel(), "float32");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  const int64_t n = x.numel();
  const bool vec = ((reinterpret_cast<uintptr_t>(x.data) | reinterpret_cast<uintptr_t>(out.data)) & 15) == 0;
  const int64_t n4 = vec ? n / 4 : 0;
  if (n4 > 0) {
    const int blocks = (int)std::min<int64_t>((n4 + 255) / 256, 132 * 16);
    copy_vec4<<<blocks, 256, 0, ca::stream()>>>(reinterpret_cast<const float4*>(x.data),
                                                reinterpret_cast<float4*>(out.data), n4);
  }
  const int64_t rest = n - n4 * 4;
  if (rest > 0)
    copy_tail<<<(unsigned)((rest + 255) / 256), 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(),
                                                                       n4 * 4, n);
}
CA_EXPORT(relu_nonneg);
