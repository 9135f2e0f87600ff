// out[i, k] = x[i, k] + gelu(sum_k' x[i, k'] v[k'] + c), exact (erf) GELU; one block per row.
#include "cuda_agent.h"

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) residual_gelu_rows(const float* __restrict__ x, const float* __restrict__ v,
                                                               const float* __restrict__ c, float* __restrict__ out,
                                                               int64_t cols) {
  const float* xr = x + (int64_t)blockIdx.x * cols;
  float* orow = out + (int64_t)blockIdx.x * cols;
  float acc = 0.f;
  for (int64_t k = threadIdx.x; k < cols; k += kThreads) acc = fmaf(xr[k], v[k], acc);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  __shared__ float partial[kThreads / 32];
  __shared__ float g;
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = c[0];
    for (int w = 0; w < kThreads / 32; ++w) m += partial[w];
    g = 0.5f * m * (1.f + erff(m * 0.70710678118654752440f));
  }
  __syncthreads();
  const float add = g;
  for (int64_t k = threadIdx.x; k < cols; k += kThreads) orow[k] = xr[k] + add;
}

void residual_gelu_of_rowdot(ca::Tensor x, ca::Tensor v, ca::Tensor c, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && v.dtype == ca::DType::Float32 && c.dtype == ca::DType::Float32 &&
               out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 2 && x.is_contiguous() && out.is_contiguous() && v.is_contiguous(), "contiguous tensors");
  CA_CHECK(v.numel() == x.size(1) && c.numel() == 1 && out.numel() == x.numel(), "shapes");
  const int64_t rows = x.size(0), cols = x.size(1);
  if (rows == 0 || cols == 0) return;
  CA_CHECK(rows <= 0x7fffffff, "too many rows");
  residual_gelu_rows<<<(unsigned)rows, kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), v.data_ptr<float>(),
                                                                    c.data_ptr<float>(), out.data_ptr<float>(), cols);
}
CA_EXPORT(residual_gelu_of_rowdot);
