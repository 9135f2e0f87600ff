#include "cuda_agent.h"

__global__ void tanh_kernel(const float* __restrict__ a, float* __restrict__ out) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < a.numel()) out[i] = tanhf(a[i]);
}

void tanh(ca::Tensor a, ca::Tensor out) {
  CA_CHECK(a.dtype == ca::DType::Float32 && a.is_contiguous(), "tanh expects contiguous float32");
  int64_t n = a.numel();
  int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  tanh_kernel<<<blocks, threads, 0, ca::stream()>>>(a.data_ptr<float>(), out.data_ptr<float>());
}
CA_EXPORT(tanh);