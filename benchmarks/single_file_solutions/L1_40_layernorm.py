"""LayerNorm over the trailing dimensions with Welford's algorithm, one block per row."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layernorm_cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

struct Welford {
    float mean;
    float m2;
    float count;
};

__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
    float count = a.count + b.count;
    if (count == 0.f) return a;
    float delta = b.mean - a.mean;
    Welford r;
    r.mean = a.mean + delta * b.count / count;
    r.m2 = a.m2 + b.m2 + delta * delta * a.count * b.count / count;
    r.count = count;
    return r;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int cols, float eps) {
    __shared__ Welford partial[256];
    const float* row = x + (int64_t)blockIdx.x * cols;
    Welford w{0.f, 0.f, 0.f};
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        Welford one{row[c], 0.f, 1.f};
        w = welford_merge(w, one);
    }
    partial[threadIdx.x] = w;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] = welford_merge(partial[threadIdx.x], partial[threadIdx.x + s]);
        __syncthreads();
    }
    float mean = partial[0].mean;
    float rstd = rsqrtf(partial[0].m2 / cols + eps);
    float* out = y + (int64_t)blockIdx.x * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * gamma[c] + beta[c];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    int cols = gamma.numel();
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = xc.numel() / cols;
    layernorm_kernel<<<rows, 256>>>(xc.data_ptr<float>(), gamma.contiguous().data_ptr<float>(),
                                    beta.contiguous().data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

layernorm_cpp = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);"

layernorm = load_inline(name="layernorm_welford", cpp_sources=layernorm_cpp, cuda_sources=layernorm_cuda,
                        functions=["layernorm_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return layernorm.layernorm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)


def get_inputs():
    return [torch.randn(16, 64, 256).cuda()]


def get_init_inputs():
    return [(256,)]
