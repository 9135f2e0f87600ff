#include "cuda_agent.h"

// Vectorised ReLU: float4 loads and stores where the pointers allow, a scalar tail otherwise.
__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
    y[i] = v;
  }
}

__global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = fmaxf(x[i], 0.0f);
  }
}

void relu(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && x.is_contiguous() && out.is_contiguous(), "relu expects contiguous float32");
  int64_t n = x.numel();
  bool aligned = (reinterpret_cast<uintptr_t>(x.data) % 16 == 0) && (reinterpret_cast<uintptr_t>(out.data) % 16 == 0);
  int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    int64_t blocks = (n4 + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    relu_vec4<<<(unsigned)blocks, 256, 0, ca::stream()>>>(reinterpret_cast<const float4*>(x.data),
                                                          reinterpret_cast<float4*>(out.data), n4);
  }
  if (n4 * 4 < n) {
    int64_t rest = n - n4 * 4;
    int64_t blocks = (rest + 255) / 256;
    if (blocks > 132 * 32) blocks = 132 * 32;
    relu_scalar<<<(unsigned)blocks, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
  }
}
CA_EXPORT(relu);
