import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

depthwise_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define KMAX 7

__global__ void depthwise_conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                        int C, int H, int W, int KS, int OH, int OW, int stride, int pad) {
    __shared__ float wk[KMAX * KMAX];
    int nc = blockIdx.z;
    int c = nc % C;
    if (threadIdx.x < KS * KS && threadIdx.y == 0) wk[threadIdx.x] = w[c * KS * KS + threadIdx.x];
    __syncthreads();
    int ow = blockIdx.x * blockDim.x + threadIdx.x;
    int oh = blockIdx.y * blockDim.y + threadIdx.y;
    if (oh >= OH || ow >= OW) return;
    const float* plane = x + (int64_t)nc * H * W;
    float acc = 0.f;
    for (int i = 0; i < KS; ++i) {
        int ih = oh * stride - pad + i;
        if (ih < 0 || ih >= H) continue;
        for (int j = 0; j < KS; ++j) {
            int iw = ow * stride - pad + j;
            if (iw >= 0 && iw < W) acc += plane[ih * W + iw] * wk[i * KS + j];
        }
    }
    y[(int64_t)nc * OH * OW + oh * OW + ow] = acc;
}

torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor w, int stride, int pad) {
    x = x.contiguous();
    int N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), KS = w.size(2);
    TORCH_CHECK(KS <= KMAX, "kernel size up to 7");
    int OH = (H + 2 * pad - KS) / stride + 1, OW = (W + 2 * pad - KS) / stride + 1;
    auto y = torch::empty({N, C, OH, OW}, x.options());
    dim3 block(16, 16);
    dim3 grid((OW + 15) / 16, (OH + 15) / 16, N * C);
    depthwise_conv2d_kernel<<<grid, block>>>(x.data_ptr<float>(), w.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                                             C, H, W, KS, OH, OW, stride, pad);
    return y;
}
"""

depthwise_cpp = "torch::Tensor depthwise_conv2d(torch::Tensor x, torch::Tensor w, int stride, int pad);"

depthwise = load_inline(name="depthwise_conv2d", cpp_sources=depthwise_cpp, cuda_sources=depthwise_source,
                        functions=["depthwise_conv2d"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, channels, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=stride, padding=padding, groups=channels, bias=False)
        self.stride = stride
        self.padding = padding

    def forward(self, x):
        return depthwise.depthwise_conv2d(x, self.conv.weight, self.stride, self.padding)


def get_inputs():
    return [torch.randn(8, 32, 64, 64).cuda()]


def get_init_inputs():
    return [32, 3, 1, 1]
