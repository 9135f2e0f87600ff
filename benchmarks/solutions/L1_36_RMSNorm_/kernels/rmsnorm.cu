// RMS normalisation over dim 1 of (batch, C, *): x / sqrt(mean(x^2 over C) + eps).
// One thread per (batch, spatial) position; consecutive threads take consecutive spatial positions, so every read
// and write is coalesced. The C values of a position are read twice (sum of squares, then scale).
#include "cuda_agent.h"

__global__ void rmsnorm_dim1(const float* __restrict__ x, float* __restrict__ y, int64_t batch, int64_t C,
                             int64_t inner, float eps) {
  const int64_t total = batch * inner;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t b = idx / inner, i = idx % inner;
    const float* p = x + b * C * inner + i;
    float* q = y + b * C * inner + i;
    float s0 = 0.f, s1 = 0.f;
    int64_t c = 0;
    for (; c + 2 <= C; c += 2) {
      const float v0 = p[c * inner], v1 = p[(c + 1) * inner];
      s0 = fmaf(v0, v0, s0);
      s1 = fmaf(v1, v1, s1);
    }
    if (c < C) { const float v = p[c * inner]; s0 = fmaf(v, v, s0); }
    const float inv = rsqrtf((s0 + s1) / (float)C + eps);
    for (c = 0; c < C; ++c) q[c * inner] = p[c * inner] * inv;
  }
}

void rmsnorm_forward(ca::Tensor x, ca::Tensor out, double eps) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "rmsnorm expects float32 tensors");
  CA_CHECK(x.dim() >= 2, "rmsnorm expects (batch, features, ...)");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "rmsnorm expects contiguous tensors");
  const int64_t batch = x.size(0), C = x.size(1);
  int64_t inner = 1;
  for (int d = 2; d < x.dim(); ++d) inner *= x.size(d);
  if (batch * inner == 0 || C == 0) return;
  const int threads = 256;
  int64_t blocks = (batch * inner + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  rmsnorm_dim1<<<(unsigned)blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), batch, C,
                                                               inner, (float)eps);
}
CA_EXPORT(rmsnorm_forward);
