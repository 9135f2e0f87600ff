#include "cuda_agent.h"
#include <cuda_fp16.h>

__global__ void fused_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    __half v = __float2half(x[i]);
    __half s = hrcp(__hadd(__float2half(1.0f), hexp(__hneg(v))));
    y[i] = __half2float(__hadd(__hmul(v, s), __hmul(__float2half(0.5f), __hmul(v, v))));
  }
}

void fused(ca::Tensor x, ca::Tensor out) {
  fused_kernel<<<4096, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}
CA_EXPORT(fused);
