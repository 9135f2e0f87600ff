#include "cuda_agent.h"

#include <cublas_v2.h>

#include <algorithm>

namespace {

cublasHandle_t cublas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) CA_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  return handles[device];
}

__global__ void __launch_bounds__(256) add_relu_rows(float* __restrict__ y, const float* __restrict__ bias,
                                                     int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = y[i] + bias[i % cols];
    y[i] = v < 0.f ? 0.f : v;
  }
}

}  // namespace

// y (M, N) = x (M, K) @ w (N, K)^T
void matmul(ca::Tensor x, ca::Tensor w, ca::Tensor y) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32,
           "float32 expected");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "2-D tensors");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && y.size(0) == M && y.size(1) == N, "shape mismatch");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "sizes out of range");
  if (M == 0 || N == 0) return;
  cublasHandle_t h = cublas_handle();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 0.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &beta, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
}
CA_EXPORT(matmul);

void add_relu_(ca::Tensor y, ca::Tensor bias) {
  CA_CHECK(y.dtype == ca::DType::Float32 && bias.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(y.dim() == 2 && y.is_contiguous() && bias.is_contiguous() && bias.numel() == y.size(1), "shapes");
  const int64_t n = y.numel();
  if (n == 0) return;
  const unsigned blocks = (unsigned)std::min<int64_t>((n + 255) / 256, 132 * 16);
  add_relu_rows<<<blocks, 256, 0, ca::stream()>>>(y.data_ptr<float>(), bias.data_ptr<float>(), y.size(0), y.size(1));
}
CA_EXPORT(add_relu_);
