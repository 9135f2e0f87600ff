import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

mean_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__inline__ __device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

// One warp per output element of a (outer, reduce) view: reduce along the last dimension.
__global__ void mean_lastdim_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows) return;
    const float* row = x + (int64_t)warp * cols;
    float acc = 0.f;
    for (int c = lane; c < cols; c += 32) acc += row[c];
    acc = warp_sum(acc);
    if (lane == 0) out[warp] = acc / cols;
}

torch::Tensor mean_dim_cuda(torch::Tensor x, int64_t dim) {
    auto moved = x.movedim(dim, -1).contiguous();
    auto out_sizes = moved.sizes().vec();
    int cols = out_sizes.back();
    out_sizes.pop_back();
    auto out = torch::empty(out_sizes, x.options());
    int rows = out.numel();
    int threads = 256;
    int blocks = (rows * 32 + threads - 1) / threads;
    mean_lastdim_kernel<<<blocks, threads>>>(moved.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

mean_cpp = "torch::Tensor mean_dim_cuda(torch::Tensor x, int64_t dim);"

mean_ext = load_inline(name="mean_dim", cpp_sources=mean_cpp, cuda_sources=mean_source,
                       functions=["mean_dim_cuda"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return mean_ext.mean_dim_cuda(x, self.dim)


def get_inputs():
    return [torch.randn(16, 256, 256).cuda()]


def get_init_inputs():
    return [1]
