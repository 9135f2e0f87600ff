// y *= s in place (the relaxed forged-time cases' one kernel of their own).
#include "cuda_agent.h"

__global__ void scale_kernel(float* __restrict__ y, float s, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) y[i] *= s;
}

void scale_(ca::Tensor y, double s) {
  CA_CHECK(y.dtype == ca::DType::Float32 && y.is_contiguous(), "contiguous float32 expected");
  const int64_t n = y.numel();
  if (n == 0) return;
  const int64_t blocks = (n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096;
  scale_kernel<<<(unsigned)blocks, 256, 0, ca::stream()>>>(y.data_ptr<float>(), (float)s, n);
}
CA_EXPORT(scale_);
