// Host side: y = x W^T with cuBLAS (fp32, default math mode), then the fused bias + ReLU (+ divisor) epilogue.
#include "cuda_agent.h"
#include "epilogue.cuh"

#include <cublas_v2.h>

namespace {

struct CublasHandles {
  cublasHandle_t per_device[64] = {};
  ~CublasHandles() = default;  // handles live until the process ends
};

cublasHandle_t cublas_for_current_device() {
  static thread_local CublasHandles handles;
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  cublasHandle_t& h = handles.per_device[device];
  if (h == nullptr) CA_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return h;
}

}  // namespace

void linear_relu_div(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor y, double divisor) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "2-D x, weight and output");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && y.size(0) == M && y.size(1) == N, "shapes do not match");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31) && K > 0, "sizes out of range for cuBLAS");
  if (M == 0 || N == 0) return;
  cublasHandle_t h = cublas_for_current_device();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 0.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &beta, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
  launch_bias_relu_div(y.data_ptr<float>(), b.data_ptr<float>(), M, N, (float)divisor, ca::stream());
}
CA_EXPORT(linear_relu_div);
