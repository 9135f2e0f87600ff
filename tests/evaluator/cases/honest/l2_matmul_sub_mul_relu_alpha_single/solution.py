import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

static cublasHandle_t blas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  const int dev = c10::cuda::current_device();
  TORCH_CHECK(dev >= 0 && dev < 64, "device index out of range");
  if (!handles[dev]) TORCH_CHECK(cublasCreate(&handles[dev]) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  return handles[dev];
}

__global__ void __launch_bounds__(256) add_bias_relu(float* __restrict__ y, const float* __restrict__ bias,
                                                     int64_t rows, int64_t cols) {
  const int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  const float b = bias[col];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = y[r * cols + col] + b;
    y[r * cols + col] = v < 0.f ? 0.f : v;
  }
}

// relu(alpha * x @ weight^T + bias)
torch::Tensor scaled_linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double alpha) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
              bias.scalar_type() == torch::kFloat32, "float32 expected");
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && weight.size(1) == x.size(1) && bias.numel() == weight.size(0),
              "x (M, K), weight (N, K), bias (N)");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "contiguous tensors expected");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K > 0 && K < (1LL << 31), "sizes out of range");
  auto y = torch::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y;
  auto stream = at::cuda::getCurrentCUDAStream();
  cublasHandle_t h = blas_handle();
  TORCH_CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const float a = (float)alpha, zero = 0.f;
  TORCH_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &a, weight.data_ptr<float>(), (int)K,
                          x.data_ptr<float>(), (int)K, &zero, y.data_ptr<float>(), (int)N) == CUBLAS_STATUS_SUCCESS,
              "cublasSgemm failed");
  dim3 grid((unsigned)((N + 255) / 256), (unsigned)std::min<int64_t>(M, 2048));
  add_bias_relu<<<grid, 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), M, N);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

CPP = "torch::Tensor scaled_linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double alpha);"

fused = load_inline(
    name="honest_l2_matmul_sub_mul_relu_alpha",
    cpp_sources=CPP,
    cuda_sources=CUDA,
    functions=["scaled_linear_relu"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value
        with torch.no_grad():
            folded = (self.linear.bias.double() - subtract_value) * multiply_value
        self.register_buffer("folded_bias", folded.float())

    def forward(self, x):
        return fused.scaled_linear_relu(x, self.linear.weight, self.folded_bias, self.multiply_value)
