// max_pool2d over NCHW float32 (padding counts as -inf, NaN propagates as in PyTorch). One thread per output.
#include "cuda_agent.h"

#include <algorithm>
#include <cmath>

struct PoolShape {
  int64_t planes;  // N * C
  int64_t H, W, Ho, Wo;
};

__device__ __forceinline__ void take(float& m, float v) {
  if (v > m || isnan(v)) m = v;
}

// KT > 0: the window (KT, ST, PT, DT) is fixed at compile time and the loops unroll; KT == 0: the runtime values.
template <int KT, int ST, int PT, int DT>
__global__ void __launch_bounds__(256) max_pool2d_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                         PoolShape sh, int k, int s, int p, int d) {
  constexpr bool kFixed = KT > 0;
  const int K = kFixed ? KT : k, S = kFixed ? ST : s, P = kFixed ? PT : p, D = kFixed ? DT : d;
  const int64_t total = sh.planes * sh.Ho * sh.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = i % sh.Wo;
    const int64_t oh = (i / sh.Wo) % sh.Ho;
    const int64_t plane = i / (sh.Wo * sh.Ho);
    const float* xp = x + plane * sh.H * sh.W;
    float m = -INFINITY;
#pragma unroll
    for (int kh = 0; kh < K; ++kh) {
      const int64_t ih = oh * S - P + (int64_t)kh * D;
      if (ih < 0 || ih >= sh.H) continue;
#pragma unroll
      for (int kw = 0; kw < K; ++kw) {
        const int64_t iw = ow * S - P + (int64_t)kw * D;
        if (iw >= 0 && iw < sh.W) take(m, xp[ih * sh.W + iw]);
      }
    }
    y[i] = m;
  }
}

void max_pool2d(ca::Tensor x, ca::Tensor y, int64_t k, int64_t s, int64_t p, int64_t d) {
  CA_CHECK(x.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 4 && y.dim() == 4 && x.is_contiguous() && y.is_contiguous(), "contiguous NCHW expected");
  CA_CHECK(k > 0 && s > 0 && d > 0 && p >= 0 && 2 * p <= k, "invalid pooling parameters");
  PoolShape sh{x.size(0) * x.size(1), x.size(2), x.size(3), y.size(2), y.size(3)};
  CA_CHECK(y.size(0) == x.size(0) && y.size(1) == x.size(1), "output batch/channels differ");
  CA_CHECK(sh.Ho == (sh.H + 2 * p - d * (k - 1) - 1) / s + 1 && sh.Wo == (sh.W + 2 * p - d * (k - 1) - 1) / s + 1,
           "output size does not match the pooling geometry");
  const int64_t total = y.numel();
  if (total == 0) return;
  int device = 0, sms = 132;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const unsigned blocks = (unsigned)std::min<int64_t>((total + 255) / 256, (int64_t)sms * 32);
  cudaStream_t st = ca::stream();
  const int ki = (int)k, si = (int)s, pi = (int)p, di = (int)d;
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  if (k == 4 && s == 1 && p == 1 && d == 1) {
    max_pool2d_kernel<4, 1, 1, 1><<<blocks, 256, 0, st>>>(xp, yp, sh, ki, si, pi, di);
  } else if (k == 2 && s == 2 && p == 0 && d == 1) {
    max_pool2d_kernel<2, 2, 0, 1><<<blocks, 256, 0, st>>>(xp, yp, sh, ki, si, pi, di);
  } else {
    max_pool2d_kernel<0, 0, 0, 0><<<blocks, 256, 0, st>>>(xp, yp, sh, ki, si, pi, di);
  }
}
CA_EXPORT(max_pool2d);
