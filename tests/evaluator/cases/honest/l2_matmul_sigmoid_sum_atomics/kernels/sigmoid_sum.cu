#include "cuda_agent.h"

#include <cublas_v2.h>

constexpr int kThreads = 256;
constexpr int kChunk = 2048;  // columns per block

static cublasHandle_t cublas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!handles[dev]) CA_CHECK(cublasCreate(&handles[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return handles[dev];
}

// grid (ceil(cols / kChunk), rows): out[row] += sum over the chunk of sigmoid(y[row, j] + b[j])
__global__ void __launch_bounds__(kThreads) sigmoid_rowsum_kernel(const float* __restrict__ y,
                                                                  const float* __restrict__ bias,
                                                                  float* __restrict__ out, int64_t cols) {
  const int64_t row = blockIdx.y;
  const int64_t j0 = (int64_t)blockIdx.x * kChunk;
  const int64_t j1 = min(cols, j0 + kChunk);
  const float* yr = y + row * cols;
  float s = 0.f;
  for (int64_t j = j0 + threadIdx.x; j < j1; j += kThreads) s += 1.f / (1.f + expf(-(yr[j] + bias[j])));
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.f;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (threadIdx.x == 0) atomicAdd(out + row, s);
  }
}

void linear_sigmoid_rowsum(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor scratch, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 &&
               scratch.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous() && scratch.is_contiguous() &&
               out.is_contiguous(), "contiguous tensors");
  CA_CHECK(x.dim() == 2 && w.dim() == 2, "2-D x and weight");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && scratch.numel() == M * N && out.numel() == M, "shape mismatch");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "sizes out of range");
  if (M == 0 || N == 0) return;
  CA_CHECK(M <= 65535, "too many rows for grid.y");
  cublasHandle_t h = cublas_handle();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float one = 1.f, zero = 0.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &zero, scratch.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
  dim3 grid((unsigned)((N + kChunk - 1) / kChunk), (unsigned)M);
  sigmoid_rowsum_kernel<<<grid, kThreads, 0, ca::stream()>>>(scratch.data_ptr<float>(), b.data_ptr<float>(),
                                                              out.data_ptr<float>(), N);
}
CA_EXPORT(linear_sigmoid_rowsum);
