// C = A @ B (fp32, row-major) with cuBLAS SGEMM in its default math mode (full fp32, no TF32).
// Row-major C = A B is column-major C^T = B^T A^T, so B and A are passed in swapped order without transposes.
#include "cuda_agent.h"
#include <cublas_v2.h>

static cublasHandle_t handle_for_device() {
  static thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) {
    CA_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  }
  return handles[device];
}

void matmul_forward(ca::Tensor a, ca::Tensor b, ca::Tensor c) {
  CA_CHECK(a.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 && c.dtype == ca::DType::Float32,
           "matmul expects float32 tensors");
  CA_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2, "matmul expects 2-D matrices");
  CA_CHECK(a.is_contiguous() && b.is_contiguous() && c.is_contiguous(), "matmul expects contiguous matrices");
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  CA_CHECK(b.size(0) == K && c.size(0) == M && c.size(1) == N, "matmul shapes do not match");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matrix too large for one SGEMM");
  if (M == 0 || N == 0) return;
  cublasHandle_t h = handle_for_device();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
                                        b.data_ptr<float>(), (int)N, a.data_ptr<float>(), (int)K, &beta,
                                        c.data_ptr<float>(), (int)N);
  CA_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed");
}
CA_EXPORT(matmul_forward);
