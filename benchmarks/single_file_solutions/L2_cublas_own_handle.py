"""A cuBLAS handle of its own (created once), batched GEMM, and a scaling kernel."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

static cublasHandle_t g_handle = nullptr;

static cublasHandle_t get_handle() {
    if (g_handle == nullptr) {
        TORCH_CHECK(cublasCreate(&g_handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
    }
    return g_handle;
}

__global__ void scale_kernel(float* data, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= s;
}

torch::Tensor scaled_bmm(torch::Tensor a, torch::Tensor b, double scale) {
    a = a.contiguous();
    b = b.contiguous();
    int batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
    auto c = torch::empty({batch, m, n}, a.options());
    const float alpha = 1.f, beta = 0.f;
    cublasStatus_t st = cublasSgemmStridedBatched(get_handle(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                                  b.data_ptr<float>(), n, (long long)k * n,
                                                  a.data_ptr<float>(), k, (long long)m * k, &beta,
                                                  c.data_ptr<float>(), n, (long long)m * n, batch);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemmStridedBatched failed");
    int total = c.numel();
    scale_kernel<<<(total + 511) / 512, 512>>>(c.data_ptr<float>(), (float)scale, total);
    return c;
}
"""

scaled_bmm = load_inline(
    name="scaled_bmm",
    cpp_sources="torch::Tensor scaled_bmm(torch::Tensor a, torch::Tensor b, double scale);",
    cuda_sources=source,
    functions=["scaled_bmm"],
    extra_ldflags=["-lcublas"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        torch.cuda.synchronize()
        return scaled_bmm.scaled_bmm(a, b, self.scale)


def get_inputs():
    return [torch.randn(8, 128, 64).cuda(), torch.randn(8, 64, 96).cuda()]


def get_init_inputs():
    return [0.125]
