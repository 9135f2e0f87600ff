// Conv3d (stride 1, no padding, with bias) reduced on the fly: sums[n, co] = (sum_p y, sum_p y^2) over the output
// positions p of channel co of sample n; then GroupNorm + mean over (C, D, H, W) from those sums, in double.
#include "cuda_agent.h"

constexpr int kThreads = 256;

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// grid (Cout, N): block (co, n) computes every output of channel co of sample n; weights of co in shared memory.
__global__ void __launch_bounds__(kThreads)
conv3d_channel_sums_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                           double* __restrict__ sums, int Cin, int D, int H, int W, int KD, int KH, int KW) {
  extern __shared__ float ws[];  // Cin * KD * KH * KW
  const int co = blockIdx.x, n = blockIdx.y, Cout = gridDim.x;
  const int taps = Cin * KD * KH * KW;
  for (int i = threadIdx.x; i < taps; i += kThreads) ws[i] = w[(int64_t)co * taps + i];
  __syncthreads();
  const int Do = D - KD + 1, Ho = H - KH + 1, Wo = W - KW + 1;
  const int64_t S = (int64_t)Do * Ho * Wo;
  const float* xn = x + (int64_t)n * Cin * D * H * W;
  const float b = bias[co];
  double s1 = 0.0, s2 = 0.0;
  for (int64_t p = threadIdx.x; p < S; p += kThreads) {
    const int ow = (int)(p % Wo), oh = (int)((p / Wo) % Ho), od = (int)(p / ((int64_t)Wo * Ho));
    float acc = b;
    int t = 0;
    for (int ci = 0; ci < Cin; ++ci) {
      for (int kd = 0; kd < KD; ++kd) {
        for (int kh = 0; kh < KH; ++kh) {
          const float* row = xn + (((int64_t)ci * D + od + kd) * H + oh + kh) * W + ow;
          for (int kw = 0; kw < KW; ++kw, ++t) acc = fmaf(ws[t], __ldg(row + kw), acc);
        }
      }
    }
    s1 += acc;
    s2 += (double)acc * acc;
  }
  __shared__ double p1[kThreads / 32], p2[kThreads / 32];
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  if ((threadIdx.x & 31) == 0) {
    p1[threadIdx.x >> 5] = s1;
    p2[threadIdx.x >> 5] = s2;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double t1 = 0.0, t2 = 0.0;
    for (int i = 0; i < kThreads / 32; ++i) {
      t1 += p1[i];
      t2 += p2[i];
    }
    sums[((int64_t)n * Cout + co) * 2] = t1;
    sums[((int64_t)n * Cout + co) * 2 + 1] = t2;
  }
}

// out[n] = mean over (c, p) of gamma_c * (y - mu_g) * rstd_g + beta_c
//        = (1/C) sum_c [gamma_c * (sum1_c / S - mu_g) * rstd_g + beta_c]
__global__ void groupnorm_mean_kernel(const double* __restrict__ sums, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, float* __restrict__ out, int N, int C, int G,
                                      double eps, double S) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int cpg = C / G;
  const double* s = sums + (int64_t)n * C * 2;
  double total = 0.0;
  for (int g = 0; g < G; ++g) {
    double g1 = 0.0, g2 = 0.0;
    for (int c = g * cpg; c < (g + 1) * cpg; ++c) {
      g1 += s[2 * c];
      g2 += s[2 * c + 1];
    }
    const double count = S * cpg;
    const double mu = g1 / count;
    const double var = fmax(g2 / count - mu * mu, 0.0);
    const double rstd = 1.0 / sqrt(var + eps);
    for (int c = g * cpg; c < (g + 1) * cpg; ++c) {
      total += (double)gamma[c] * (s[2 * c] / S - mu) * rstd + (double)beta[c];
    }
  }
  out[n] = (float)(total / C);
}

void conv3d_channel_sums(ca::Tensor x, ca::Tensor w, ca::Tensor bias, ca::Tensor sums) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && bias.dtype == ca::DType::Float32,
           "float32 expected");
  CA_CHECK(sums.dtype == ca::DType::Float64, "float64 sums");
  CA_CHECK(x.dim() == 5 && w.dim() == 5 && x.size(1) == w.size(1), "x (N, Cin, D, H, W), w (Cout, Cin, kd, kh, kw)");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && bias.is_contiguous() && sums.is_contiguous(), "contiguous");
  const int64_t N = x.size(0), Cout = w.size(0);
  CA_CHECK(bias.numel() == Cout && sums.numel() == N * Cout * 2, "bias / sums shapes");
  CA_CHECK(x.size(2) >= w.size(2) && x.size(3) >= w.size(3) && x.size(4) >= w.size(4), "input smaller than kernel");
  if (N == 0) return;
  CA_CHECK(N <= 65535 && Cout <= 0x7fffffff, "grid too large");
  const int taps = (int)(w.size(1) * w.size(2) * w.size(3) * w.size(4));
  const size_t smem = sizeof(float) * (size_t)taps;
  CA_CHECK(smem <= 48 * 1024, "filter too large for shared memory");
  conv3d_channel_sums_kernel<<<dim3((unsigned)Cout, (unsigned)N), kThreads, smem, ca::stream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), bias.data_ptr<float>(), sums.data_ptr<double>(), (int)x.size(1),
      (int)x.size(2), (int)x.size(3), (int)x.size(4), (int)w.size(2), (int)w.size(3), (int)w.size(4));
}
CA_EXPORT(conv3d_channel_sums);

void groupnorm_mean_from_sums(ca::Tensor sums, ca::Tensor gamma, ca::Tensor beta, ca::Tensor out, int64_t groups,
                              double eps, int64_t spatial) {
  CA_CHECK(sums.dtype == ca::DType::Float64 && gamma.dtype == ca::DType::Float32 &&
               beta.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "dtypes");
  const int64_t N = out.numel(), C = gamma.numel();
  CA_CHECK(beta.numel() == C && sums.numel() == N * C * 2 && groups > 0 && C % groups == 0 && spatial > 0, "shapes");
  if (N == 0) return;
  groupnorm_mean_kernel<<<(unsigned)((N + 127) / 128), 128, 0, ca::stream()>>>(
      sums.data_ptr<double>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), out.data_ptr<float>(), (int)N,
      (int)C, (int)groups, eps, (double)spatial);
}
CA_EXPORT(groupnorm_mean_from_sums);
