// out = gelu(x W'^T + b') with W' = W / d and b' = b / d folded at construction.
//   1. broadcast b' into every row of out;  2. cublasSgemm with beta = 1 adds x W'^T;  3. exact GELU in place.
#include "cuda_agent.h"

#include <cublas_v2.h>

#include <algorithm>

static cublasHandle_t get_cublas() {
  static thread_local cublasHandle_t handles[64] = {};
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!handles[dev]) CA_CHECK(cublasCreate(&handles[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return handles[dev];
}

__global__ void broadcast_rows_kernel(float* __restrict__ out, const float* __restrict__ row, int64_t rows,
                                      int64_t cols) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float v = row[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) out[r * cols + c] = v;
}

__global__ void __launch_bounds__(256) gelu_inplace_kernel(float* __restrict__ y, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = y[i];
    y[i] = 0.5f * v * (1.f + erff(v * 0.70710678118654752440f));
  }
}

void linear_gelu(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 &&
               out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "contiguous tensors");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && out.dim() == 2, "2-D tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && out.size(0) == M && out.size(1) == N, "shape mismatch");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "too large for one SGEMM");
  if (M == 0 || N == 0) return;
  cudaStream_t s = ca::stream();
  broadcast_rows_kernel<<<dim3((unsigned)((N + 255) / 256), (unsigned)std::min<int64_t>(M, 4096)), 256, 0, s>>>(
      out.data_ptr<float>(), b.data_ptr<float>(), M, N);
  cublasHandle_t h = get_cublas();
  CA_CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 1.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &beta, out.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
  const int64_t n = M * N;
  gelu_inplace_kernel<<<(unsigned)std::min<int64_t>((n + 255) / 256, 132 * 16), 256, 0, s>>>(out.data_ptr<float>(), n);
}
CA_EXPORT(linear_gelu);
