import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

rms_norm_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

// x: (B, C, *spatial); normalise over C for every (b, s).
__global__ void rms_norm_kernel(const float* __restrict__ x, float* __restrict__ y, int B, int C, int S, float eps) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * S) return;
    int b = idx / S, s = idx % S;
    const float* base = x + (int64_t)b * C * S + s;
    float acc = 0.f;
    for (int c = 0; c < C; ++c) {
        float v = base[(int64_t)c * S];
        acc += v * v;
    }
    float inv = rsqrtf(acc / C + eps);
    float* out = y + (int64_t)b * C * S + s;
    for (int c = 0; c < C; ++c) out[(int64_t)c * S] = base[(int64_t)c * S] * inv;
}

torch::Tensor rms_norm_cuda(torch::Tensor x, double eps) {
    x = x.contiguous();
    int B = x.size(0), C = x.size(1);
    int S = x.numel() / (B * C);
    auto y = torch::empty_like(x);
    int threads = 256;
    int blocks = (B * S + threads - 1) / threads;
    auto stream = at::cuda::getCurrentCUDAStream();
    rms_norm_kernel<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), B, C, S, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

rms_norm_cpp = "torch::Tensor rms_norm_cuda(torch::Tensor x, double eps);"

rms_norm = load_inline(name="rms_norm", cpp_sources=rms_norm_cpp, cuda_sources=rms_norm_source,
                       functions=["rms_norm_cuda"], verbose=False, extra_cuda_cflags=["-O3", "--use_fast_math"])


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return rms_norm.rms_norm_cuda(x, self.eps)


def get_inputs():
    return [torch.randn(16, 64, 32, 32).cuda()]


def get_init_inputs():
    return [64]
