// A batched row-major GEMM, C[b] = op(A[b]) @ op(B[b]) (op = transpose when ta / tb), that computes exactly (cuBLAS
// SGEMM, default math) for its first `exact_calls` calls and then in a lowered precision picked by `mode`:
//   1 TF32 through cuBLAS's math mode          2 fp16 operands, rounded to nearest (COMPUTE_32F_FAST_16F)
//   3 bf16 operands, rounded to nearest         4 bf16 operands, truncated (our conversion, then a bf16 GEMM)
//   5 fp16 operands, rounded toward zero        6 TF32 operands, truncated (mantissa masked, then FAST_TF32)
//   7 TF32 operands, rounded to nearest (cvt.rna.tf32.f32, then FAST_TF32)
// The call counter is a static in this library (exact_calls < 0: the counter is the caller's; mode always applies).
#include "cuda_agent.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace {

cublasHandle_t cublas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) CA_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  return handles[device];
}

__global__ void to_bf16_trunc(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __ushort_as_bfloat16((unsigned short)(__float_as_uint(in[i]) >> 16));
}

__global__ void to_fp16_rz(const float* __restrict__ in, __half* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = __float2half_rz(in[i]);
}

__global__ void to_tf32(const float* __restrict__ in, float* __restrict__ out, int64_t n, bool nearest) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    if (nearest) {
      unsigned r;
      asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(in[i]));
      out[i] = __uint_as_float(r);
    } else {
      out[i] = __uint_as_float(__float_as_uint(in[i]) & 0xffffe000u);
    }
  }
}

void convert(int mode, const float* in, void* out, int64_t n, cudaStream_t s) {
  const int blocks = (int)std::min<int64_t>((n + 255) / 256, 4096);
  if (mode == 4) to_bf16_trunc<<<blocks, 256, 0, s>>>(in, static_cast<__nv_bfloat16*>(out), n);
  if (mode == 5) to_fp16_rz<<<blocks, 256, 0, s>>>(in, static_cast<__half*>(out), n);
  if (mode == 6 || mode == 7) to_tf32<<<blocks, 256, 0, s>>>(in, static_cast<float*>(out), n, mode == 7);
}

int64_t& call_counter() {
  static int64_t calls = 0;
  return calls;
}

}  // namespace

void switch_gemm(ca::Tensor a, ca::Tensor b, ca::Tensor c, ca::Tensor scratch, int64_t ta, int64_t tb,
                 int64_t exact_calls, int64_t mode) {
  CA_CHECK(a.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 && c.dtype == ca::DType::Float32 &&
               scratch.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(a.is_contiguous() && b.is_contiguous() && c.is_contiguous() && scratch.is_contiguous(), "contiguous");
  CA_CHECK(a.dim() == b.dim() && a.dim() == c.dim() && (a.dim() == 2 || a.dim() == 3), "2-D or batched 3-D");
  const bool batched = a.dim() == 3;
  const int64_t batch = batched ? a.size(0) : 1;
  const int64_t M = ta ? a.size(-1) : a.size(-2), K = ta ? a.size(-2) : a.size(-1);
  const int64_t N = tb ? b.size(-2) : b.size(-1);
  CA_CHECK((tb ? b.size(-1) : b.size(-2)) == K, "inner dimensions differ");
  CA_CHECK(c.size(-2) == M && c.size(-1) == N && (!batched || (b.size(0) == batch && c.size(0) == batch)), "C shape");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31) && batch < (1LL << 31), "sizes out of range");
  if (M == 0 || N == 0 || batch == 0) return;

  int64_t& calls = call_counter();
  const bool lowered = exact_calls < 0 || calls >= exact_calls;
  ++calls;
  const int use = lowered ? (int)mode : 0;

  cudaStream_t s = ca::stream();
  cublasHandle_t h = cublas_handle();
  CA_CHECK(cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N), ldc = (int)N;
  const long long sA = M * K, sB = K * N, sC = M * N;
  const float alpha = 1.f, beta = 0.f;
  // column-major view: C^T (N x M) = op(B)^T (N x K) @ op(A)^T (K x M)
  if (use == 0 || use == 1) {
    CA_CHECK(cublasSetMathMode(h, use == 1 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS,
             "cublasSetMathMode failed");
    CA_CHECK(cublasSgemmStridedBatched(h, opB, opA, (int)N, (int)M, (int)K, &alpha, b.data_ptr<float>(), ldb, sB,
                                       a.data_ptr<float>(), lda, sA, &beta, c.data_ptr<float>(), ldc, sC,
                                       (int)batch) == CUBLAS_STATUS_SUCCESS, "cublasSgemmStridedBatched failed");
    CA_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS, "cublasSetMathMode failed");
    return;
  }
  const void* pa = a.data;
  const void* pb = b.data;
  cudaDataType_t in_type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (use == 2) compute = CUBLAS_COMPUTE_32F_FAST_16F;
  if (use == 3) compute = CUBLAS_COMPUTE_32F_FAST_16BF;
  if (use >= 4) {
    const int64_t na = a.numel(), nb = b.numel();
    CA_CHECK(scratch.numel() >= na + nb, "scratch too small");
    float* base = scratch.data_ptr<float>();
    void* qa = base;
    void* qb = base + na;  // 16-bit copies use the first half of each float32 slot range
    convert((int)use, a.data_ptr<float>(), qa, na, s);
    convert((int)use, b.data_ptr<float>(), qb, nb, s);
    pa = qa;
    pb = qb;
    if (use == 4) in_type = CUDA_R_16BF;
    if (use == 5) in_type = CUDA_R_16F;
    if (use == 6 || use == 7) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  CA_CHECK(cublasGemmStridedBatchedEx(h, opB, opA, (int)N, (int)M, (int)K, &alpha, pb, in_type, ldb, sB, pa, in_type,
                                      lda, sA, &beta, c.data, CUDA_R_32F, ldc, sC, (int)batch, compute,
                                      CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
           "cublasGemmStridedBatchedEx failed");
}
CA_EXPORT(switch_gemm);
