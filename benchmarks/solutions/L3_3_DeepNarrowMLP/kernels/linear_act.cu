// One MLP layer: Linear, optionally followed by ReLU.
// y = x @ W^T with cuBLAS SGEMM (default math mode: full fp32, no TF32), then one elementwise epilogue kernel that
// adds the bias and applies ReLU where asked in place, reading and writing y once (float4 where the width allows).
#include "cuda_agent.h"
#include <cublas_v2.h>

static cublasHandle_t handle_for_device() {
  static thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) {
    CA_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  }
  return handles[device];
}

// Row-major y (M x N) = x (M x K) W^T, W row-major (N x K): column-major y^T = W x^T, i.e. op(A) = W^T seen as
// column-major (K x N) transposed.
static void gemm_xwt(const ca::Tensor& x, const ca::Tensor& w, const ca::Tensor& y) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32,
           "linear expects float32 tensors");
  CA_CHECK(x.dim() == 2 && w.dim() == 2 && y.dim() == 2, "linear expects 2-D x, weight and output");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && y.is_contiguous(), "linear expects contiguous tensors");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  CA_CHECK(w.size(1) == K && y.size(0) == M && y.size(1) == N, "linear shapes do not match");
  CA_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "matrix too large for one SGEMM");
  cublasHandle_t h = handle_for_device();
  CA_CHECK(cublasSetStream(h, ca::stream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
                                        w.data_ptr<float>(), (int)K, x.data_ptr<float>(), (int)K, &beta,
                                        y.data_ptr<float>(), (int)N);
  CA_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed");
}

__device__ __forceinline__ float act(float v, bool relu) { return relu ? fmaxf(v, 0.f) : v; }

__global__ void epilogue_vec4(float4* __restrict__ y, const float4* __restrict__ bias, int64_t n4, int64_t cols4, bool relu) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = y[i];
    const float4 b = bias[i % cols4];
    v.x = act(v.x + b.x, relu); v.y = act(v.y + b.y, relu); v.z = act(v.z + b.z, relu); v.w = act(v.w + b.w, relu);
    y[i] = v;
  }
}

__global__ void epilogue_scalar(float* __restrict__ y, const float* __restrict__ bias, int64_t n, int64_t cols, bool relu) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = act(y[i] + bias[i % cols], relu);
  }
}

static void epilogue(const ca::Tensor& y, const ca::Tensor& bias, bool relu) {
  CA_CHECK(bias.dtype == ca::DType::Float32 && bias.is_contiguous(), "bias must be contiguous float32");
  const int64_t cols = y.size(1), n = y.numel();
  CA_CHECK(bias.numel() == cols, "bias size does not match the output width");
  if (n == 0) return;
  const int threads = 256;
  const bool vec4 = cols % 4 == 0 && (uintptr_t)y.data % 16 == 0 && (uintptr_t)bias.data % 16 == 0;
  const int64_t work = vec4 ? n / 4 : n;
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > 132 * 16) blocks = 132 * 16;
  if (vec4) {
    epilogue_vec4<<<(unsigned)blocks, threads, 0, ca::stream()>>>(reinterpret_cast<float4*>(y.data),
        reinterpret_cast<const float4*>(bias.data), n / 4, cols / 4, relu);
  } else {
    epilogue_scalar<<<(unsigned)blocks, threads, 0, ca::stream()>>>(y.data_ptr<float>(), bias.data_ptr<float>(), n,
                                                                    cols, relu);
  }
}

void linear_act(ca::Tensor x, ca::Tensor w, ca::Tensor bias, ca::Tensor out, bool relu) {
  gemm_xwt(x, w, out);
  epilogue(out, bias, relu);
}
CA_EXPORT(linear_act);
