// Direct 3x3 convolution (stride 1, no padding, bias) with a fused epilogue, for few input channels:
// each thread computes 2 adjacent output pixels x COG output channels; the block's weights sit in shared memory.
// Epilogues: 0 = (v / divisor) then LeakyReLU(slope); 1 = ReLU then x * clamp((x + 3) / 6, 0, 1).
#include "cuda_agent.h"

namespace {

constexpr int COG = 16;       // output channels per thread
constexpr int kThreads = 128; // 2 output rows x 64 threads, 2 pixels each

template <int EPI>
__device__ __forceinline__ float epilogue(float v, float divisor, float slope) {
  if (EPI == 0) {
    v = v / divisor;
    return v > 0.f ? v : v * slope;
  } else {
    v = v > 0.f ? v : 0.f;
    return v * fminf(fmaxf((v + 3.f) / 6.f, 0.f), 1.f);
  }
}

template <int EPI>
__global__ __launch_bounds__(kThreads) void conv3x3_fused(const float* __restrict__ x, const float* __restrict__ w,
                                                          const float* __restrict__ bias, float* __restrict__ y,
                                                          int Cin, int H, int W, int Cout, float divisor, float slope) {
  extern __shared__ float ws[];  // [Cin * 9][COG]
  const int co0 = blockIdx.z * COG, n = blockIdx.y;
  const int Ho = H - 2, Wo = W - 2;
  for (int i = threadIdx.x; i < Cin * 9 * COG; i += kThreads) {
    const int c = i % COG, r = i / COG;
    ws[i] = co0 + c < Cout ? w[(int64_t)(co0 + c) * Cin * 9 + r] : 0.f;
  }
  __syncthreads();
  const int oh = blockIdx.x * 2 + threadIdx.x / 64;
  const int ow = (threadIdx.x % 64) * 2;
  for (int owb = ow; owb < Wo; owb += 128) {  // wide rows: the 64 threads of a row step across it
    if (oh >= Ho) break;
    const bool two = owb + 1 < Wo;
    float acc0[COG], acc1[COG];
#pragma unroll
    for (int c = 0; c < COG; ++c) acc0[c] = acc1[c] = 0.f;
    for (int ci = 0; ci < Cin; ++ci) {
      const float* xc = x + (((int64_t)n * Cin + ci) * H + oh) * W + owb;
#pragma unroll
      for (int kh = 0; kh < 3; ++kh) {
        const float* xr = xc + (int64_t)kh * W;
        const float v0 = __ldg(xr), v1 = __ldg(xr + 1), v2 = __ldg(xr + 2), v3 = two ? __ldg(xr + 3) : 0.f;
        const float* wk = ws + (ci * 9 + kh * 3) * COG;
#pragma unroll
        for (int c = 0; c < COG; ++c) {
          acc0[c] = fmaf(v0, wk[c], acc0[c]);
          acc1[c] = fmaf(v1, wk[c], acc1[c]);
          acc0[c] = fmaf(v1, wk[COG + c], acc0[c]);
          acc1[c] = fmaf(v2, wk[COG + c], acc1[c]);
          acc0[c] = fmaf(v2, wk[2 * COG + c], acc0[c]);
          acc1[c] = fmaf(v3, wk[2 * COG + c], acc1[c]);
        }
      }
    }
#pragma unroll
    for (int c = 0; c < COG; ++c) {
      const int co = co0 + c;
      if (co >= Cout) break;
      const float b = bias[co];
      float* yr = y + (((int64_t)n * Cout + co) * Ho + oh) * Wo + owb;
      yr[0] = epilogue<EPI>(acc0[c] + b, divisor, slope);
      if (two) yr[1] = epilogue<EPI>(acc1[c] + b, divisor, slope);
    }
  }
}

}  // namespace

void conv3x3_epilogue(ca::Tensor x, ca::Tensor w, ca::Tensor bias, ca::Tensor y, int64_t epi, double divisor,
                      double slope) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && bias.dtype == ca::DType::Float32 &&
               y.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.dim() == 4 && w.dim() == 4 && y.dim() == 4, "4-D tensors expected");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && bias.is_contiguous() && y.is_contiguous(), "contiguous tensors");
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3), Cout = w.size(0);
  CA_CHECK(w.size(1) == Cin && w.size(2) == 3 && w.size(3) == 3 && bias.numel() == Cout, "3x3 weight (Cout, Cin, 3, 3)");
  CA_CHECK(H >= 3 && W >= 3, "input smaller than the kernel");
  CA_CHECK(y.size(0) == N && y.size(1) == Cout && y.size(2) == H - 2 && y.size(3) == W - 2, "output shape");
  CA_CHECK(N <= 65535 && Cin <= 256 && Cout <= 65535 * COG, "sizes out of range");
  CA_CHECK(epi == 0 || epi == 1, "unknown epilogue");
  if (N == 0 || Cout == 0) return;
  const dim3 grid((unsigned)((H - 2 + 1) / 2), (unsigned)N, (unsigned)((Cout + COG - 1) / COG));
  const size_t smem = (size_t)Cin * 9 * COG * sizeof(float);
  if (epi == 0) {
    conv3x3_fused<0><<<grid, kThreads, smem, ca::stream()>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                             bias.data_ptr<float>(), y.data_ptr<float>(), (int)Cin,
                                                             (int)H, (int)W, (int)Cout, (float)divisor, (float)slope);
  } else {
    conv3x3_fused<1><<<grid, kThreads, smem, ca::stream()>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                             bias.data_ptr<float>(), y.data_ptr<float>(), (int)Cin,
                                                             (int)H, (int)W, (int)Cout, (float)divisor, (float)slope);
  }
}
CA_EXPORT(conv3x3_epilogue);
