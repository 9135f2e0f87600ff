#include "cuda_agent.h"
#include "tiled_gemm.cuh"

// torch's mish: x * tanh(log1p(exp(x))), in fp32
__device__ __forceinline__ float mish(float x) { return x * tanhf(log1pf(expf(x))); }

struct MishMish {
  __device__ __forceinline__ float operator()(float v) const { return mish(mish(v)); }
};

void linear_mish_mish(ca::Tensor x, ca::Tensor w_t, ca::Tensor bias, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w_t.dtype == ca::DType::Float32 && bias.dtype == ca::DType::Float32 &&
               out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && w_t.is_contiguous() && bias.is_contiguous() && out.is_contiguous(),
           "contiguous tensors expected");
  CA_CHECK(x.dim() == 2 && w_t.dim() == 2 && out.dim() == 2, "2-D tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w_t.size(1);
  CA_CHECK(w_t.size(0) == K && bias.numel() == N && out.size(0) == M && out.size(1) == N, "shape mismatch");
  if (M == 0 || N == 0) return;
  constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;
  const int64_t gx = (N + BN - 1) / BN, gy = (M + BM - 1) / BM;
  CA_CHECK(gx <= 0x7fffffff && gy <= 65535, "matrix too large for this grid");
  sgemm_bias_epilogue<BM, BN, BK, TM, TN><<<dim3((unsigned)gx, (unsigned)gy), (BM / TM) * (BN / TN), 0, ca::stream()>>>(
      x.data_ptr<float>(), w_t.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), M, N, K, MishMish{});
}
CA_EXPORT(linear_mish_mish);
