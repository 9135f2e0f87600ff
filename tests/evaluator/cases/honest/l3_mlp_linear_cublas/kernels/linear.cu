// linear(x, W, b, y, relu): y = x W^T + b, then ReLU when asked; cuBLAS SGEMM (fp32) + one epilogue kernel.
#include "cuda_agent.h"

#include <cublas_v2.h>

namespace {

cublasHandle_t cublas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!handles[dev]) CA_CHECK(cublasCreate(&handles[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return handles[dev];
}

template <bool RELU>
__global__ __launch_bounds__(256) void bias_epilogue(float* __restrict__ y, const float* __restrict__ b, int64_t rows,
                                                     int64_t cols) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float bc = b[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float v = y[r * cols + c] + bc;
    if (RELU) v = v < 0.f ? 0.f : v;
    y[r * cols + c] = v;
  }
}

}  // namespace

void linear(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor y, bool relu) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "2-D tensors");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && y.size(0) == M && y.size(1) == N, "shape mismatch");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "sizes out of range");
  if (M == 0 || N == 0) return;
  cublasHandle_t h = cublas_handle();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 0.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &beta, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
  const dim3 grid((unsigned)((N + 255) / 256), (unsigned)(M < 1024 ? M : 1024));
  if (relu) {
    bias_epilogue<true><<<grid, 256, 0, ca::stream()>>>(y.data_ptr<float>(), b.data_ptr<float>(), M, N);
  } else {
    bias_epilogue<false><<<grid, 256, 0, ca::stream()>>>(y.data_ptr<float>(), b.data_ptr<float>(), M, N);
  }
}
CA_EXPORT(linear);
