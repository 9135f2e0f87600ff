import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

maxpool_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void maxpool2d_kernel(const float* input, float* output, int N, int C, int H, int W,
                                 int OH, int OW, int k, int stride, int pad, int dilation) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * C * OH * OW;
    if (idx >= total) return;
    int ow = idx % OW, oh = (idx / OW) % OH, nc = idx / (OW * OH);
    const float* plane = input + (int64_t)nc * H * W;
    float best = -FLT_MAX;
    for (int i = 0; i < k; ++i) {
        int ih = oh * stride - pad + i * dilation;
        if (ih < 0 || ih >= H) continue;
        for (int j = 0; j < k; ++j) {
            int iw = ow * stride - pad + j * dilation;
            if (iw < 0 || iw >= W) continue;
            best = fmaxf(best, plane[ih * W + iw]);
        }
    }
    output[idx] = best;
}

torch::Tensor maxpool2d_cuda(torch::Tensor input, int kernel_size, int stride, int padding, int dilation) {
    input = input.contiguous();
    int N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
    int OH = (H + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
    int OW = (W + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
    auto output = torch::empty({N, C, OH, OW}, input.options());
    int total = N * C * OH * OW;
    maxpool2d_kernel<<<(total + 255) / 256, 256>>>(input.data_ptr<float>(), output.data_ptr<float>(), N, C, H, W,
                                                   OH, OW, kernel_size, stride, padding, dilation);
    return output;
}
"""

maxpool_cpp = "torch::Tensor maxpool2d_cuda(torch::Tensor input, int kernel_size, int stride, int padding, int dilation);"

maxpool = load_inline(name="maxpool2d", cpp_sources=maxpool_cpp, cuda_sources=maxpool_source,
                      functions=["maxpool2d_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, kernel_size, stride, padding, dilation):
        super().__init__()
        self.args = (kernel_size, stride, padding, dilation)

    def forward(self, x):
        return maxpool.maxpool2d_cuda(x, *self.args)


def get_inputs():
    return [torch.randn(16, 32, 64, 64).cuda()]


def get_init_inputs():
    return [2, 2, 1, 3]
