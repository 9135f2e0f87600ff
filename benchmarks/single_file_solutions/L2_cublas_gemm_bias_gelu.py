"""cuBLAS SGEMM on PyTorch's handle and stream, then a bias + GELU epilogue kernel."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cublas_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

__global__ void bias_gelu_kernel(float* __restrict__ y, const float* __restrict__ bias, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        float v = y[idx] + bias[idx % cols];
        y[idx] = 0.5f * v * (1.f + erff(v * 0.70710678f));
    }
}

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "CUDA tensors expected");
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    int M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    const float alpha = 1.f, beta = 0.f;
    // row-major y = x @ w^T is column-major y^T = w @ x^T
    cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, wc.data_ptr<float>(), K,
                                        xc.data_ptr<float>(), K, &beta, y.data_ptr<float>(), N);
    TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed with status ", (int)status);
    int total = M * N;
    bias_gelu_kernel<<<(total + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bias.contiguous().data_ptr<float>(), M, N);
    return y;
}
"""

cublas_cpp = "torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_gelu = load_inline(name="cublas_linear_gelu", cpp_sources=cublas_cpp, cuda_sources=cublas_source,
                          functions=["linear_gelu"], extra_cuda_cflags=["-O3"], extra_ldflags=["-lcublas"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return linear_gelu.linear_gelu(x, self.linear.weight, self.linear.bias)


def get_inputs():
    return [torch.randn(128, 512).cuda()]


def get_init_inputs():
    return [512, 256]
