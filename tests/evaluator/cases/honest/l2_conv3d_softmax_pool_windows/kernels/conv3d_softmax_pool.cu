// max over a 4x4x4 window of softmax_c(conv3d(x)) = MaxPool3d(2)(MaxPool3d(2)(...)) with floor sizes; one block of
// 64 threads per output window, one conv voxel per thread, all 16 output channels in registers.
#include "cuda_agent.h"

#include <math_constants.h>

namespace {

constexpr int kCout = 16, kWin = 4, kThreads = kWin * kWin * kWin;

__global__ __launch_bounds__(kThreads) void conv3d_softmax_pool(const float* __restrict__ x, const float* __restrict__ w,
                                                                const float* __restrict__ bias, float* __restrict__ y,
                                                                int Cin, int D, int H, int W, int D2, int H2, int W2) {
  extern __shared__ float ws[];  // [Cin * 27][kCout]
  __shared__ float warp_max[2][kCout];
  for (int i = threadIdx.x; i < Cin * 27 * kCout; i += kThreads) {
    const int c = i % kCout, r = i / kCout;
    ws[i] = w[(int64_t)c * Cin * 27 + r];
  }
  __syncthreads();
  int64_t b = blockIdx.x;
  const int w2 = (int)(b % W2);
  b /= W2;
  const int h2 = (int)(b % H2);
  b /= H2;
  const int d2 = (int)(b % D2);
  const int n = (int)(b / D2);
  const int od = d2 * kWin + threadIdx.x / 16, oh = h2 * kWin + (threadIdx.x / 4) % 4, ow = w2 * kWin + threadIdx.x % 4;
  float acc[kCout];
#pragma unroll
  for (int c = 0; c < kCout; ++c) acc[c] = bias[c];
  for (int ci = 0; ci < Cin; ++ci) {
    const float* xc = x + ((((int64_t)n * Cin + ci) * D + od) * H + oh) * W + ow;
    const float* wc = ws + ci * 27 * kCout;
#pragma unroll
    for (int k = 0; k < 27; ++k) {
      const float v = __ldg(xc + ((int64_t)(k / 9) * H + (k / 3) % 3) * W + (k % 3));
#pragma unroll
      for (int c = 0; c < kCout; ++c) acc[c] = fmaf(v, wc[k * kCout + c], acc[c]);
    }
  }
  float m = -CUDART_INF_F, s = 0.f;
#pragma unroll
  for (int c = 0; c < kCout; ++c) m = fmaxf(m, acc[c]);
#pragma unroll
  for (int c = 0; c < kCout; ++c) {
    acc[c] = expf(acc[c] - m);
    s += acc[c];
  }
  const float inv = 1.f / s;
#pragma unroll
  for (int c = 0; c < kCout; ++c) {
    float v = acc[c] * inv;
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    acc[c] = v;
  }
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int c = 0; c < kCout; ++c) warp_max[threadIdx.x >> 5][c] = acc[c];
  }
  __syncthreads();
  if (threadIdx.x < kCout) {
    const int c = threadIdx.x;
    y[((((int64_t)n * kCout + c) * D2 + d2) * H2 + h2) * W2 + w2] = fmaxf(warp_max[0][c], warp_max[1][c]);
  }
}

}  // namespace

void conv3d_softmax_double_pool(ca::Tensor x, ca::Tensor w, ca::Tensor bias, ca::Tensor y) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && bias.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 5 && w.dim() == 5 && y.dim() == 5, "5-D tensors expected");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && bias.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  const int64_t N = x.size(0), Cin = x.size(1), D = x.size(2), H = x.size(3), W = x.size(4);
  CA_CHECK(w.size(0) == kCout && w.size(1) == Cin && w.size(2) == 3 && w.size(3) == 3 && w.size(4) == 3 &&
               bias.numel() == kCout, "a (16, Cin, 3, 3, 3) weight");
  CA_CHECK(Cin <= 16 && D >= 3 && H >= 3 && W >= 3, "sizes");
  const int64_t D2 = (D - 2) / 2 / 2, H2 = (H - 2) / 2 / 2, W2 = (W - 2) / 2 / 2;
  CA_CHECK(y.size(0) == N && y.size(1) == kCout && y.size(2) == D2 && y.size(3) == H2 && y.size(4) == W2, "output");
  const int64_t blocks = N * D2 * H2 * W2;
  if (blocks == 0) return;
  CA_CHECK(blocks < (1LL << 31), "too many windows");
  const size_t smem = (size_t)Cin * 27 * kCout * sizeof(float);
  conv3d_softmax_pool<<<(unsigned)blocks, kThreads, smem, ca::stream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), (int)Cin, (int)D, (int)H,
      (int)W, (int)D2, (int)H2, (int)W2);
}
CA_EXPORT(conv3d_softmax_double_pool);
