// y = x @ w^T (cuBLAS SGEMM, w already pooled), then out[r] = max_j gelu(y[r, j] + b[j]) * scale.
#include "cuda_agent.h"

#include <cublas_v2.h>
#include <math_constants.h>

namespace {

cublasHandle_t cublas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) CA_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  return handles[device];
}

constexpr int kThreads = 256;  // 8 warps, one row per warp

__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

__global__ __launch_bounds__(kThreads) void gelu_scale_rowmax(const float* __restrict__ y, const float* __restrict__ b,
                                                              float* __restrict__ out, int64_t rows, int64_t cols,
                                                              float scale) {
  const int64_t row = (int64_t)blockIdx.x * (kThreads / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* yr = y + row * cols;
  float m = -CUDART_INF_F;
  for (int64_t j = lane; j < cols; j += 32) m = fmaxf(m, gelu_erf(yr[j] + b[j]) * scale);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (lane == 0) out[row] = m;
}

}  // namespace

void pooled_linear_gelu_max(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor y, ca::Tensor out, double scale) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "2-D x, w, y");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous() && y.is_contiguous() && out.is_contiguous(),
           "contiguous tensors expected");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && y.size(0) == M && y.size(1) == N && out.numel() == M, "shapes");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "sizes out of range");
  if (M == 0) return;
  CA_CHECK(N > 0 && K > 0, "empty feature dimension");
  cublasHandle_t h = cublas_handle();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  CA_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS, "cublasSetMathMode failed");
  const float alpha = 1.f, beta = 0.f;
  // column-major view: y^T (N x M) = w (N x K, stored as K x N col-major, transposed) @ x^T (K x M)
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &beta, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
  const int64_t blocks = (M + kThreads / 32 - 1) / (kThreads / 32);
  gelu_scale_rowmax<<<(unsigned)blocks, kThreads, 0, ca::stream()>>>(y.data_ptr<float>(), b.data_ptr<float>(),
                                                                     out.data_ptr<float>(), M, N, (float)scale);
}
CA_EXPORT(pooled_linear_gelu_max);
