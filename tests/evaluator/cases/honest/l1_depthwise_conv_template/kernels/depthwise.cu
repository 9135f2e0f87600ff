// Depthwise 2-D convolution, NCHW float32, square K x K filter per channel, zero padding, optional bias.
#include "cuda_agent.h"

#include <algorithm>

struct DwShape {
  int64_t N, C, H, W, Ho, Wo;
  int stride, pad;
};

// KT > 0: the filter size is the compile-time constant KT (loops unroll); KT == 0: it is the runtime k_any.
template <int KT>
__global__ void __launch_bounds__(256) depthwise_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                        const float* __restrict__ bias, bool has_bias,
                                                        float* __restrict__ y, DwShape s, int k_any) {
  const int K = KT > 0 ? KT : k_any;
  const int64_t total = s.N * s.C * s.Ho * s.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = i % s.Wo;
    const int64_t oh = (i / s.Wo) % s.Ho;
    const int64_t nc = i / (s.Wo * s.Ho);
    const int64_t c = nc % s.C;
    const float* xp = x + nc * s.H * s.W;
    const float* wp = w + c * (int64_t)K * K;
    float acc = has_bias ? bias[c] : 0.f;
    const int64_t h0 = oh * s.stride - s.pad, w0 = ow * s.stride - s.pad;
#pragma unroll
    for (int kh = 0; kh < K; ++kh) {
      const int64_t ih = h0 + kh;
      if (ih < 0 || ih >= s.H) continue;
#pragma unroll
      for (int kw = 0; kw < K; ++kw) {
        const int64_t iw = w0 + kw;
        if (iw >= 0 && iw < s.W) acc = fmaf(__ldg(xp + ih * s.W + iw), __ldg(wp + kh * K + kw), acc);
      }
    }
    y[i] = acc;
  }
}

void depthwise_conv2d(ca::Tensor x, ca::Tensor w, ca::Tensor bias, bool has_bias, ca::Tensor y, int64_t stride,
                      int64_t pad) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32,
           "float32 expected");
  CA_CHECK(x.dim() == 4 && w.dim() == 4 && y.dim() == 4, "NCHW input, (C, 1, K, K) weight, NCHW output");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && y.is_contiguous() && bias.is_contiguous(), "contiguous tensors");
  const int64_t C = x.size(1), K = w.size(2);
  CA_CHECK(w.size(0) == C && w.size(1) == 1 && w.size(3) == K, "depthwise weight shape");
  CA_CHECK(!has_bias || bias.numel() == C, "bias shape");
  DwShape s{x.size(0), C, x.size(2), x.size(3), y.size(2), y.size(3), (int)stride, (int)pad};
  CA_CHECK(y.size(0) == s.N && y.size(1) == C && s.Ho == (s.H + 2 * pad - K) / stride + 1 &&
               s.Wo == (s.W + 2 * pad - K) / stride + 1, "output shape");
  const int64_t total = y.numel();
  if (total == 0) return;
  int device = 0, sms = 132;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const unsigned blocks = (unsigned)std::min<int64_t>((total + 255) / 256, (int64_t)sms * 32);
  const float* b = has_bias ? bias.data_ptr<float>() : nullptr;
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  switch (K) {
    case 3:
      depthwise_kernel<3><<<blocks, 256, 0, ca::stream()>>>(xp, wp, b, has_bias, yp, s, 3);
      break;
    case 5:
      depthwise_kernel<5><<<blocks, 256, 0, ca::stream()>>>(xp, wp, b, has_bias, yp, s, 5);
      break;
    default:
      depthwise_kernel<0><<<blocks, 256, 0, ca::stream()>>>(xp, wp, b, has_bias, yp, s, (int)K);
  }
}
CA_EXPORT(depthwise_conv2d);
