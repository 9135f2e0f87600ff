#include "cuda_agent.h"

__global__ void fused_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  long long start = clock64();
  while (clock64() - start < 20000000) {}  // make the race visible: the result lands late
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = v / (1.0f + expf(-v)) + 0.5f * v * v;
  }
}

void fused(ca::Tensor x, ca::Tensor out) {
  static cudaStream_t side = nullptr;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  fused_kernel<<<1024, 256, 0, side>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
CA_EXPORT(fused);
