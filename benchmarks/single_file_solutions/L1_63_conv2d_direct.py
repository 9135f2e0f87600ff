"""Direct 2D convolution (NCHW, stride and padding, no groups), one thread per output element."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

conv2d_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void conv2d_direct_kernel(const float* __restrict__ input, const float* __restrict__ weight,
                                     const float* __restrict__ bias, float* __restrict__ output,
                                     int N, int C, int H, int W, int K, int R, int S,
                                     int OH, int OW, int stride, int pad) {
    int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t total = (int64_t)N * K * OH * OW;
    if (idx >= total) return;
    int ow = idx % OW;
    int oh = (idx / OW) % OH;
    int k = (idx / ((int64_t)OW * OH)) % K;
    int n = idx / ((int64_t)OW * OH * K);
    float acc = bias != nullptr ? bias[k] : 0.f;
    for (int c = 0; c < C; ++c) {
        for (int r = 0; r < R; ++r) {
            int ih = oh * stride - pad + r;
            if (ih < 0 || ih >= H) continue;
            for (int s = 0; s < S; ++s) {
                int iw = ow * stride - pad + s;
                if (iw < 0 || iw >= W) continue;
                acc += input[(((int64_t)n * C + c) * H + ih) * W + iw] * weight[(((int64_t)k * C + c) * R + r) * S + s];
            }
        }
    }
    output[idx] = acc;
}

torch::Tensor conv2d_cuda(torch::Tensor input, torch::Tensor weight, torch::Tensor bias, int stride, int padding) {
    input = input.contiguous();
    weight = weight.contiguous();
    int N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
    int K = weight.size(0), R = weight.size(2), S = weight.size(3);
    int OH = (H + 2 * padding - R) / stride + 1;
    int OW = (W + 2 * padding - S) / stride + 1;
    auto output = torch::empty({N, K, OH, OW}, input.options());
    int64_t total = (int64_t)N * K * OH * OW;
    int threads = 256;
    int64_t blocks = (total + threads - 1) / threads;
    const float* bias_ptr = bias.defined() && bias.numel() > 0 ? bias.data_ptr<float>() : nullptr;
    conv2d_direct_kernel<<<blocks, threads>>>(input.data_ptr<float>(), weight.data_ptr<float>(), bias_ptr,
                                              output.data_ptr<float>(), N, C, H, W, K, R, S, OH, OW, stride, padding);
    return output;
}
"""

conv2d_cpp = "torch::Tensor conv2d_cuda(torch::Tensor input, torch::Tensor weight, torch::Tensor bias, int stride, int padding);"

conv2d = load_inline(name="conv2d_direct", cpp_sources=conv2d_cpp, cuda_sources=conv2d_source,
                     functions=["conv2d_cuda"], verbose=False, extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.stride = stride
        self.padding = padding

    def forward(self, x):
        return conv2d.conv2d_cuda(x, self.conv.weight, self.conv.bias, self.stride, self.padding)


def get_inputs():
    return [torch.randn(8, 3, 64, 64).cuda()]


def get_init_inputs():
    return [3, 16, 3, 1, 1]
