// x / sqrt(mean(x^2 over dim 1) + eps) for x of shape (B, C, *), contiguous. Thread p handles position
// s = p % inner of sample b = p / inner and walks the C channels (stride inner), so a warp reads 32 consecutive
// floats per channel.
#include "cuda_agent.h"

template <int C>
__global__ void __launch_bounds__(256) rms_norm_fixed(const float* __restrict__ x, float* __restrict__ y,
                                                      int64_t total, int64_t inner, float eps) {
  const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= total) return;
  const int64_t b = p / inner, s = p - b * inner;
  const float* xp = x + b * C * inner + s;
  float* yp = y + b * C * inner + s;
  float v[C];
  float ss = 0.f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    v[c] = xp[c * inner];
    ss += v[c] * v[c];
  }
  const float rms = sqrtf(ss / (float)C + eps);
#pragma unroll
  for (int c = 0; c < C; ++c) yp[c * inner] = v[c] / rms;
}

__global__ void __launch_bounds__(256) rms_norm_generic(const float* __restrict__ x, float* __restrict__ y,
                                                        int64_t total, int64_t C, int64_t inner, float eps) {
  const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= total) return;
  const int64_t b = p / inner, s = p - b * inner;
  const float* xp = x + b * C * inner + s;
  float* yp = y + b * C * inner + s;
  float ss = 0.f;
  for (int64_t c = 0; c < C; ++c) {
    const float v = xp[c * inner];
    ss += v * v;
  }
  const float rms = sqrtf(ss / (float)C + eps);
  for (int64_t c = 0; c < C; ++c) yp[c * inner] = xp[c * inner] / rms;
}

void rms_norm_dim1(ca::Tensor x, ca::Tensor y, double eps) {
  CA_CHECK(x.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && y.is_contiguous() && x.numel() == y.numel(), "contiguous tensors of one size");
  CA_CHECK(x.dim() >= 2, "RMSNorm over dim 1 needs at least 2 dims");
  const int64_t B = x.size(0), C = x.size(1);
  int64_t inner = 1;
  for (int i = 2; i < x.dim(); ++i) inner *= x.size(i);
  const int64_t total = B * inner;
  if (total == 0 || C == 0) return;
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  CA_CHECK(blocks <= 0x7fffffff, "too many positions");
  switch (C) {
    case 64:
      rms_norm_fixed<64><<<(unsigned)blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                        total, inner, (float)eps);
      break;
    case 32:
      rms_norm_fixed<32><<<(unsigned)blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                        total, inner, (float)eps);
      break;
    default:
      rms_norm_generic<<<(unsigned)blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                       total, C, inner, (float)eps);
  }
}
CA_EXPORT(rms_norm_dim1);
