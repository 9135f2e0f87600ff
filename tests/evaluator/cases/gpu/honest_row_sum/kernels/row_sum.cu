#include "cuda_agent.h"

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float partial[256];
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc += row[j];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = partial[0];
}

void row_sum(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dim() == 2 && x.is_contiguous() && x.dtype == ca::DType::Float32, "row_sum expects a 2-D float32");
  row_sum_kernel<<<(unsigned)x.size(0), 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.size(1));
}
CA_EXPORT(row_sum);
