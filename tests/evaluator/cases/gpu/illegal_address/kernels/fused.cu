#include "cuda_agent.h"

__global__ void fused_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  float* bad = reinterpret_cast<float*>(0x10);
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) bad[i] = x[i];
}

void fused(ca::Tensor x, ca::Tensor out) {
  fused_kernel<<<(unsigned)((x.numel() + 255) / 256), 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
CA_EXPORT(fused);
