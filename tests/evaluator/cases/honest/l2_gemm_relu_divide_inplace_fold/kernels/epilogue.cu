#include "epilogue.cuh"

#include <algorithm>

namespace {

__device__ __forceinline__ float bias_relu_div(float v, float b, float divisor) {
  v += b;
  return (v < 0.f ? 0.f : v) / divisor;
}

__global__ void __launch_bounds__(256) bias_relu_div_vec4(float4* __restrict__ y, const float4* __restrict__ bias,
                                                          int64_t rows, int64_t cols4, float divisor) {
  const int64_t n = rows * cols4;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = y[i];
    const float4 b = bias[i % cols4];
    v.x = bias_relu_div(v.x, b.x, divisor);
    v.y = bias_relu_div(v.y, b.y, divisor);
    v.z = bias_relu_div(v.z, b.z, divisor);
    v.w = bias_relu_div(v.w, b.w, divisor);
    y[i] = v;
  }
}

__global__ void __launch_bounds__(256) bias_relu_div_scalar(float* __restrict__ y, const float* __restrict__ bias,
                                                            int64_t rows, int64_t cols, float divisor) {
  const int64_t n = rows * cols;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = bias_relu_div(y[i], bias[i % cols], divisor);
}

}  // namespace

void launch_bias_relu_div(float* y, const float* bias, int64_t rows, int64_t cols, float divisor, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const bool vec = cols % 4 == 0 && ((reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(bias)) & 15) == 0;
  const int64_t work = vec ? n / 4 : n;
  const unsigned blocks = (unsigned)std::min<int64_t>((work + 255) / 256, 132 * 16);
  if (vec) {
    bias_relu_div_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(y), reinterpret_cast<const float4*>(bias),
                                                   rows, cols / 4, divisor);
  } else {
    bias_relu_div_scalar<<<blocks, 256, 0, stream>>>(y, bias, rows, cols, divisor);
  }
}
