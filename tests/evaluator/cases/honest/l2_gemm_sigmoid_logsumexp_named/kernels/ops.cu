// linear(x, W, b, y, act): y = act(x W^T + b), act 0 = identity, 1 = sigmoid (cuBLAS SGEMM + epilogue kernel).
// logsumexp(z, out): out[r] = log(sum_j exp(z[r, j])) computed as max + log(sum exp(z - max)), one warp per row.
#include "cuda_agent.h"

#include <cublas_v2.h>

#include <cmath>

namespace {

cublasHandle_t blas() {
  static thread_local cublasHandle_t per_device[64] = {};
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!per_device[dev]) CA_CHECK(cublasCreate(&per_device[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return per_device[dev];
}

template <int ACT>
__global__ void __launch_bounds__(256) bias_act_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                                       int64_t rows, int64_t cols) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float b = bias[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float v = y[r * cols + c] + b;
    if (ACT == 1) v = 1.f / (1.f + expf(-v));
    y[r * cols + c] = v;
  }
}

__global__ void __launch_bounds__(256) warp_row_logsumexp(const float* __restrict__ z, float* __restrict__ out,
                                                          int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float* zr = z + row * cols;
  float m = -INFINITY;
  for (int64_t j = lane; j < cols; j += 32) m = fmaxf(m, zr[j]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  float s = 0.f;
  if (isfinite(m)) {
    for (int64_t j = lane; j < cols; j += 32) s += expf(zr[j] - m);
  }
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (lane == 0) out[row] = isfinite(m) ? m + logf(s) : m;  // all -inf -> -inf; +inf -> +inf
}

}  // namespace

void linear(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor y, int64_t act) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "2-D tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && y.size(0) == M && y.size(1) == N, "shape mismatch");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31) && K > 0, "sizes out of range");
  CA_CHECK(act == 0 || act == 1, "unknown activation");
  if (M == 0 || N == 0) return;
  cublasHandle_t h = blas();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float one = 1.f, zero = 0.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w.data_ptr<float>(), (int)K,
                       x.data_ptr<float>(), (int)K, &zero, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemm failed");
  dim3 grid((unsigned)((N + 255) / 256), (unsigned)(M < 2048 ? M : 2048));
  if (act == 1) {
    bias_act_kernel<1><<<grid, 256, 0, ca::stream()>>>(y.data_ptr<float>(), b.data_ptr<float>(), M, N);
  } else {
    bias_act_kernel<0><<<grid, 256, 0, ca::stream()>>>(y.data_ptr<float>(), b.data_ptr<float>(), M, N);
  }
}
CA_EXPORT(linear);

void logsumexp(ca::Tensor z, ca::Tensor out) {
  CA_CHECK(z.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(z.dim() == 2 && z.is_contiguous() && out.is_contiguous() && out.numel() == z.size(0),
           "contiguous (rows, cols) input and one output per row");
  const int64_t rows = z.size(0), cols = z.size(1);
  if (rows == 0) return;
  CA_CHECK(cols > 0, "logsumexp over an empty dimension");
  const int64_t blocks = (rows + 7) / 8;  // 8 warps per block
  warp_row_logsumexp<<<(unsigned)blocks, 256, 0, ca::stream()>>>(z.data_ptr<float>(), out.data_ptr<float>(), rows,
                                                                 cols);
}
CA_EXPORT(logsumexp);
