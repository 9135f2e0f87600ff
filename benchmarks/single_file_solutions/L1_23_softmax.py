"""Row softmax: one block per row, max and sum with warp shuffles plus a shared-memory step."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__device__ __forceinline__ float warp_reduce_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__device__ __forceinline__ float warp_reduce_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

template <int kThreads>
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float shared[kThreads / 32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = is_max ? warp_reduce_max(v) : warp_reduce_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = threadIdx.x < kThreads / 32 ? shared[lane] : (is_max ? -FLT_MAX : 0.f);
    if (warp == 0) v = is_max ? warp_reduce_max(v) : warp_reduce_sum(v);
    __shared__ float result;
    if (threadIdx.x == 0) result = v;
    __syncthreads();
    return result;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    m = block_reduce<256>(m, true);
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
    s = block_reduce<256>(s, false);
    float inv = 1.f / s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) * inv;
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2, "softmax_cuda expects a 2D tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    softmax_kernel<<<xc.size(0), 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

softmax_cpp = "torch::Tensor softmax_cuda(torch::Tensor x);"

softmax = load_inline(
    name="softmax_rows",
    cpp_sources=softmax_cpp,
    cuda_sources=softmax_source,
    functions=["softmax_cuda"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return softmax.softmax_cuda(x)


def get_inputs():
    return [torch.randn(16, 16384).cuda()]


def get_init_inputs():
    return []
