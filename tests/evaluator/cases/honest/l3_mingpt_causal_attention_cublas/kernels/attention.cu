#include "cuda_agent.h"

#include <cublas_v2.h>

#include <cmath>

namespace {

cublasHandle_t blas() {
  static thread_local cublasHandle_t handles[64] = {};
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!handles[dev]) CA_CHECK(cublasCreate(&handles[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  CA_CHECK(cublasSetStream(handles[dev], ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  return handles[dev];
}

#define BLAS_OK(expr) CA_CHECK((expr) == CUBLAS_STATUS_SUCCESS, #expr " failed")

__global__ void add_bias_rows(float* __restrict__ y, const float* __restrict__ b, long long rows, long long cols) {
  const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float bc = b[c];
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) y[r * cols + c] += bc;
}

// In place on S (rows of length T; row r is query position i = r % T): entries j > i become 0, the rest
// exp(s - max) / sum over j <= i. One warp per row.
__global__ void __launch_bounds__(256) causal_softmax_rows(float* __restrict__ S, long long rows, int T) {
  const int lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int i = (int)(r % T);
  float* row = S + r * T;
  float m = -INFINITY;
  for (int j = lane; j <= i; j += 32) m = fmaxf(m, row[j]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float s = 0.f;
  for (int j = lane; j <= i; j += 32) s += expf(row[j] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  const float inv = 1.f / s;
  for (int j = lane; j < T; j += 32) row[j] = j <= i ? expf(row[j] - m) * inv : 0.f;
}

bool f32c(const ca::Tensor& t) { return t.dtype == ca::DType::Float32 && t.is_contiguous(); }

}  // namespace

// y (M, N) = x (M, K) @ w (N, K)^T + b
void linear(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor y) {
  CA_CHECK(f32c(x) && f32c(w) && f32c(b) && f32c(y), "contiguous float32 tensors expected");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "2-D tensors");
  const long long M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && b.numel() == N && y.size(0) == M && y.size(1) == N, "shape mismatch");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "sizes out of range");
  if (M == 0 || N == 0) return;
  const float one = 1.f, zero = 0.f;
  BLAS_OK(cublasSgemm(blas(), CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w.data_ptr<float>(), (int)K,
                      x.data_ptr<float>(), (int)K, &zero, y.data_ptr<float>(), (int)N));
  add_bias_rows<<<dim3((unsigned)((N + 255) / 256), (unsigned)(M < 4096 ? M : 4096)), 256, 0, ca::stream()>>>(
      y.data_ptr<float>(), b.data_ptr<float>(), M, N);
}
CA_EXPORT(linear);

// qkv: (B*T, 3C) rows [q | k | v], head h at columns h*hs .. h*hs+hs-1 of each part; S: (B, nh, T, T) scratch;
// y: (B*T, C), head h of position t written at y[b*T + t, h*hs ...].
void causal_attention(ca::Tensor qkv, ca::Tensor S, ca::Tensor y, int64_t B, int64_t T, int64_t nh, double scale) {
  CA_CHECK(f32c(qkv) && f32c(S) && f32c(y), "contiguous float32 tensors expected");
  CA_CHECK(B >= 0 && T > 0 && nh > 0 && qkv.dim() == 2 && qkv.size(0) == B * T && qkv.size(1) % 3 == 0,
           "qkv must be (B*T, 3C)");
  const long long C = qkv.size(1) / 3, hs = C / nh;
  CA_CHECK(hs * nh == C && y.numel() == B * T * C && S.numel() == B * nh * T * T, "shapes");
  CA_CHECK(T < (1LL << 31) && 3 * C < (1LL << 31), "sizes out of range");
  if (B == 0) return;
  cublasHandle_t h = blas();
  const float alpha = (float)scale, one = 1.f, zero = 0.f;
  float* base = qkv.data_ptr<float>();
  float* s = S.data_ptr<float>();
  float* out = y.data_ptr<float>();
  const int ld_qkv = (int)(3 * C);
  // scores: S[b, h, i, j] = scale * sum_d q[b, i, h, d] k[b, j, h, d]; column-major: C(j, i) = op_T(K)(j, :) . Q(:, i)
  for (long long b = 0; b < B; ++b) {
    const float* q = base + b * T * 3 * C;
    const float* k = q + C;
    BLAS_OK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)T, (int)T, (int)hs, &alpha, k, ld_qkv, hs, q,
                                      ld_qkv, hs, &zero, s + b * nh * T * T, (int)T, T * T, (int)nh));
  }
  const long long rows = B * nh * T;
  causal_softmax_rows<<<(unsigned)((rows + 7) / 8), 256, 0, ca::stream()>>>(s, rows, (int)T);
  // y[b, i, h, d] = sum_j P[b, h, i, j] v[b, j, h, d]; column-major: C(d, i) = V(d, :) . P^T(:, i)
  for (long long b = 0; b < B; ++b) {
    const float* v = base + b * T * 3 * C + 2 * C;
    BLAS_OK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)hs, (int)T, (int)T, &one, v, ld_qkv, hs,
                                      s + b * nh * T * T, (int)T, T * T, &zero, out + b * T * C, (int)C, hs, (int)nh));
  }
}
CA_EXPORT(causal_attention);
