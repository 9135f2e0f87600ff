"""Sum over one dimension of a (B, D1, D2) tensor: one thread block per output row, shared-memory tree."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_reduce_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sum_reduce_kernel(const float* __restrict__ x, float* __restrict__ out,
                                  int outer, int reduce, int inner) {
    extern __shared__ float sdata[];
    int o = blockIdx.x / inner;
    int in = blockIdx.x % inner;
    float acc = 0.0f;
    for (int r = threadIdx.x; r < reduce; r += blockDim.x) {
        acc += x[((int64_t)o * reduce + r) * inner + in];
    }
    sdata[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sdata[threadIdx.x] += sdata[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = sdata[0];
}

torch::Tensor sum_reduce_cuda(torch::Tensor x, int64_t dim) {
    x = x.contiguous();
    auto sizes = x.sizes().vec();
    int outer = 1, inner = 1;
    for (int64_t i = 0; i < dim; ++i) outer *= sizes[i];
    for (int64_t i = dim + 1; i < (int64_t)sizes.size(); ++i) inner *= sizes[i];
    int reduce = sizes[dim];
    sizes[dim] = 1;
    auto out = torch::empty(sizes, x.options());
    const int threads = 256;
    sum_reduce_kernel<<<outer * inner, threads, threads * sizeof(float)>>>(
        x.data_ptr<float>(), out.data_ptr<float>(), outer, reduce, inner);
    return out;
}
"""

sum_reduce = load_inline(
    name="sum_reduce",
    cpp_sources="torch::Tensor sum_reduce_cuda(torch::Tensor x, int64_t dim);",
    cuda_sources=sum_reduce_source,
    functions=["sum_reduce_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return sum_reduce.sum_reduce_cuda(x, self.dim)


def get_inputs():
    return [torch.randn(16, 256, 256).cuda()]


def get_init_inputs():
    return [1]
