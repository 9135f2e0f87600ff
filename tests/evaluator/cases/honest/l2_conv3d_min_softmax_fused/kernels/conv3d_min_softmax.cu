// softmax_c(min_d(conv3d(x)[n, c, d, h, w])) for a 3x3x3 conv (stride 1, no padding, bias), all in one kernel.
#include "cuda_agent.h"

#include <math_constants.h>

namespace {

constexpr int kThreads = 128;

template <int COUT>
__global__ __launch_bounds__(kThreads) void conv3d_min_softmax(const float* __restrict__ x, const float* __restrict__ w,
                                                               const float* __restrict__ bias, float* __restrict__ y,
                                                               int N, int Cin, int D, int H, int W) {
  extern __shared__ float ws[];  // [Cin * 27][COUT]
  for (int i = threadIdx.x; i < Cin * 27 * COUT; i += kThreads) {
    const int c = i % COUT, r = i / COUT;
    ws[i] = w[(int64_t)c * Cin * 27 + r];
  }
  __syncthreads();
  const int Do = D - 2, Ho = H - 2, Wo = W - 2;
  const int64_t total = (int64_t)N * Ho * Wo;
  const int64_t p = blockIdx.x * (int64_t)kThreads + threadIdx.x;
  if (p >= total) return;
  const int ow = (int)(p % Wo), oh = (int)((p / Wo) % Ho), n = (int)(p / ((int64_t)Ho * Wo));
  float mn[COUT];
#pragma unroll
  for (int c = 0; c < COUT; ++c) mn[c] = CUDART_INF_F;
  for (int od = 0; od < Do; ++od) {
    float acc[COUT];
#pragma unroll
    for (int c = 0; c < COUT; ++c) acc[c] = 0.f;
    for (int ci = 0; ci < Cin; ++ci) {
      const float* xc = x + ((((int64_t)n * Cin + ci) * D + od) * H + oh) * W + ow;
      const float* wc = ws + ci * 27 * COUT;
#pragma unroll
      for (int k = 0; k < 27; ++k) {
        const float v = __ldg(xc + ((int64_t)(k / 9) * H + (k / 3) % 3) * W + (k % 3));
#pragma unroll
        for (int c = 0; c < COUT; ++c) acc[c] = fmaf(v, wc[k * COUT + c], acc[c]);
      }
    }
#pragma unroll
    for (int c = 0; c < COUT; ++c) mn[c] = fminf(mn[c], acc[c] + bias[c]);
  }
  float m = -CUDART_INF_F;
#pragma unroll
  for (int c = 0; c < COUT; ++c) m = fmaxf(m, mn[c]);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < COUT; ++c) {
    mn[c] = expf(mn[c] - m);
    s += mn[c];
  }
  const float inv = 1.f / s;
  float* yp = y + ((int64_t)n * COUT * Ho + oh) * Wo + ow;
#pragma unroll
  for (int c = 0; c < COUT; ++c) yp[(int64_t)c * Ho * Wo] = mn[c] * inv;
}

}  // namespace

void conv3d_min_softmax_forward(ca::Tensor x, ca::Tensor w, ca::Tensor bias, ca::Tensor y) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && bias.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 5 && w.dim() == 5 && y.dim() == 4, "x (N, C, D, H, W), w (Cout, Cin, 3, 3, 3), y (N, Cout, H', W')");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && bias.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  const int64_t N = x.size(0), Cin = x.size(1), D = x.size(2), H = x.size(3), W = x.size(4), Cout = w.size(0);
  CA_CHECK(w.size(1) == Cin && w.size(2) == 3 && w.size(3) == 3 && w.size(4) == 3 && bias.numel() == Cout, "weight");
  CA_CHECK(Cout == 24, "this build is specialised for 24 output channels");
  CA_CHECK(D >= 3 && H >= 3 && W >= 3 && Cin <= 16, "sizes");
  CA_CHECK(y.size(0) == N && y.size(1) == Cout && y.size(2) == H - 2 && y.size(3) == W - 2, "output shape");
  const int64_t total = N * (H - 2) * (W - 2);
  if (total == 0) return;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  CA_CHECK(blocks < (1LL << 31), "too many outputs");
  const size_t smem = (size_t)Cin * 27 * 24 * sizeof(float);
  conv3d_min_softmax<24><<<(unsigned)blocks, kThreads, smem, ca::stream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), (int)N, (int)Cin, (int)D,
      (int)H, (int)W);
}
CA_EXPORT(conv3d_min_softmax_forward);
