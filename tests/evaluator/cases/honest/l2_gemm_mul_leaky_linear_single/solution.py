import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

namespace {

cublasHandle_t handle_for_current_device() {
  static thread_local cublasHandle_t handles[64] = {};
  const int device = c10::cuda::current_device();
  TORCH_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) TORCH_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  return handles[device];
}

// y[r, c] = leaky_relu((y[r, c] + bias[c]) * multiplier, slope); 2-D grid: blockIdx.y walks rows.
__global__ void bias_scale_leaky_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t rows,
                                        int64_t cols, float multiplier, float slope) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float b = bias[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float v = (y[r * cols + c] + b) * multiplier;
    y[r * cols + c] = v > 0.f ? v : v * slope;
  }
}

}  // namespace

torch::Tensor linear(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double multiplier, double slope) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "linear: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
              bias.scalar_type() == torch::kFloat32, "linear: float32 expected");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1) && bias.numel() == weight.size(0),
              "linear: x (M, K), weight (N, K), bias (N) expected");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "linear: contiguous inputs");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "linear: sizes out of range");
  auto y = torch::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  cublasHandle_t h = handle_for_current_device();
  TORCH_CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
  const float one = 1.f, zero = 0.f;
  // column-major view: y^T (N x M) = W (N x K, stored as K x N column-major, so op T) * x^T (K x M)
  TORCH_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, weight.data_ptr<float>(), (int)K,
                          x.data_ptr<float>(), (int)K, &zero, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
              "cublasSgemm failed");
  const int threads = 256;
  dim3 grid((unsigned)((N + threads - 1) / threads), (unsigned)std::min<int64_t>(M, 1024));
  bias_scale_leaky_kernel<<<grid, threads, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), M, N,
                                                        (float)multiplier, (float)slope);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_src = "torch::Tensor linear(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double multiplier, double slope);"

fused = load_inline(
    name="honest_l2_gemm_mul_leaky_linear",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["linear"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # created like the reference's: same weights
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return fused.linear(x, self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope)
