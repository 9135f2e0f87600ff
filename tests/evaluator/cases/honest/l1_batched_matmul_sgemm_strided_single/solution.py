import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

namespace {
cublasHandle_t fp32_handle() {
  static thread_local cublasHandle_t per_device[64] = {};
  const int dev = c10::cuda::current_device();
  TORCH_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (per_device[dev] == nullptr) {
    TORCH_CHECK(cublasCreate(&per_device[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
    TORCH_CHECK(cublasSetMathMode(per_device[dev], CUBLAS_PEDANTIC_MATH) == CUBLAS_STATUS_SUCCESS, "math mode");
  }
  return per_device[dev];
}
}  // namespace

torch::Tensor batched_sgemm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 expected");
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
              "(batch, M, K) x (batch, K, N) expected");
  a = a.contiguous();
  b = b.contiguous();
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  TORCH_CHECK(m < (1LL << 31) && n < (1LL << 31) && k < (1LL << 31) && batch < (1LL << 31), "sizes out of range");
  auto c = torch::empty({batch, m, n}, a.options());
  if (c.numel() == 0) return c;
  cublasHandle_t h = fp32_handle();
  TORCH_CHECK(cublasSetStream(h, at::cuda::getCurrentCUDAStream()) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  const float alpha = 1.f, beta = 0.f;
  // Row-major C_i = A_i B_i as column-major C_i^T = B_i^T A_i^T.
  const cublasStatus_t st = cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha,
                                                      b.data_ptr<float>(), (int)n, k * n, a.data_ptr<float>(),
                                                      (int)k, m * k, &beta, c.data_ptr<float>(), (int)n, m * n,
                                                      (int)batch);
  TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemmStridedBatched failed: ", (int)st);
  return c;
}
"""

_ext = load_inline(
    name="honest_l1_batched_sgemm_strided",
    cpp_sources="torch::Tensor batched_sgemm(torch::Tensor a, torch::Tensor b);",
    cuda_sources=_src,
    functions=["batched_sgemm"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _ext.batched_sgemm(A, B)
