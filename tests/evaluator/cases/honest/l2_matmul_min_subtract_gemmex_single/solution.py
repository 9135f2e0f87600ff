import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_code = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

namespace {

cublasHandle_t handle() {
  static thread_local cublasHandle_t hs[64] = {};
  const int dev = c10::cuda::current_device();
  TORCH_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!hs[dev]) TORCH_CHECK(cublasCreate(&hs[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return hs[dev];
}

__device__ __forceinline__ float min_sub(float v, float b, float c) { return fminf(v + b, c) - c; }

__global__ void __launch_bounds__(256) bias_min_sub_vec4(float4* __restrict__ y, const float4* __restrict__ bias,
                                                         const float* __restrict__ constant, int64_t n4,
                                                         int64_t cols4) {
  const float c = *constant;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = y[i];
    const float4 b = bias[i % cols4];
    v.x = min_sub(v.x, b.x, c);
    v.y = min_sub(v.y, b.y, c);
    v.z = min_sub(v.z, b.z, c);
    v.w = min_sub(v.w, b.w, c);
    y[i] = v;
  }
}

__global__ void __launch_bounds__(256) bias_min_sub_scalar(float* __restrict__ y, const float* __restrict__ bias,
                                                           const float* __restrict__ constant, int64_t n,
                                                           int64_t cols) {
  const float c = *constant;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = min_sub(y[i], bias[i % cols], c);
}

}  // namespace

torch::Tensor linear_min_sub(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor constant) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda() && constant.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
              bias.scalar_type() == torch::kFloat32 && constant.scalar_type() == torch::kFloat32, "float32 expected");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1) && bias.numel() == weight.size(0) &&
              constant.numel() == 1, "x (M, K), weight (N, K), bias (N), constant (1)");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "sizes out of range");
  auto y = torch::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y;
  auto stream = at::cuda::getCurrentCUDAStream();
  cublasHandle_t h = handle();
  TORCH_CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float alpha = 1.f, beta = 0.f;
  // y^T = W x^T in cuBLAS's column-major terms; CUBLAS_COMPUTE_32F keeps every product and sum in fp32.
  const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha,
                                         weight.data_ptr<float>(), CUDA_R_32F, (int)K, x.data_ptr<float>(), CUDA_R_32F,
                                         (int)K, &beta, y.data_ptr<float>(), CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT);
  TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed with status ", (int)st);
  const int64_t n = M * N;
  const int64_t cap = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 16;
  const bool vec = N % 4 == 0 && ((reinterpret_cast<uintptr_t>(y.data_ptr()) |
                                   reinterpret_cast<uintptr_t>(bias.data_ptr())) & 15) == 0;
  if (vec) {
    const unsigned blocks = (unsigned)std::min<int64_t>((n / 4 + 255) / 256, cap);
    bias_min_sub_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<float4*>(y.data_ptr<float>()),
                                                  reinterpret_cast<const float4*>(bias.data_ptr<float>()),
                                                  constant.data_ptr<float>(), n / 4, N / 4);
  } else {
    const unsigned blocks = (unsigned)std::min<int64_t>((n + 255) / 256, cap);
    bias_min_sub_scalar<<<blocks, 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(),
                                                    constant.data_ptr<float>(), n, N);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_code = "torch::Tensor linear_min_sub(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor constant);"

ext = load_inline(
    name="honest_l2_matmul_min_subtract_gemmex",
    cpp_sources=cpp_code,
    cuda_sources=cuda_code,
    functions=["linear_min_sub"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, constant):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.constant = nn.Parameter(torch.tensor(constant))

    def forward(self, x):
        return ext.linear_min_sub(x, self.linear.weight, self.linear.bias, self.constant)
