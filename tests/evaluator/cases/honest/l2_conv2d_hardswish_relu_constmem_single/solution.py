import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int kMaxCin = 8, kCout = 64;
__constant__ float c_w[kCout * kMaxCin * 9];  // (Cout, Cin, 3, 3), as the layer stores it
__constant__ float c_b[kCout];

__device__ __forceinline__ float hardswish_relu(float v) {
  const float hs = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // torch's hardswish: x * relu6(x + 3) / 6
  return hs > 0.f ? hs : 0.f;
}

// one thread per output pixel (n, oh, ow), all kCout channels in registers; CIN > 0: the input channels are a
// compile-time constant, so every weight is a constant-bank operand of its FMA (no load); CIN == 0: any Cin <= 8
template <int CIN>
__global__ __launch_bounds__(128) void conv3x3_hswish_relu(const float* __restrict__ x, float* __restrict__ y,
                                                           int N, int Cin_rt, int H, int W) {
  const int Cin = CIN > 0 ? CIN : Cin_rt;
  const int Ho = H - 2, Wo = W - 2;
  const int64_t total = (int64_t)N * Ho * Wo;
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < total; p += (int64_t)gridDim.x * blockDim.x) {
    const int ow = (int)(p % Wo);
    const int oh = (int)((p / Wo) % Ho);
    const int n = (int)(p / ((int64_t)Wo * Ho));
    float acc[kCout];
#pragma unroll
    for (int c = 0; c < kCout; ++c) acc[c] = c_b[c];
#pragma unroll(CIN > 0 ? CIN : 1)
    for (int ci = 0; ci < Cin; ++ci) {
      const float* xc = x + (((int64_t)n * Cin + ci) * H + oh) * W + ow;
#pragma unroll
      for (int k = 0; k < 9; ++k) {
        const float v = __ldg(xc + (k / 3) * W + (k % 3));
#pragma unroll
        for (int c = 0; c < kCout; ++c) acc[c] = fmaf(v, c_w[(c * Cin + ci) * 9 + k], acc[c]);
      }
    }
    float* yp = y + ((int64_t)n * kCout * Ho + oh) * Wo + ow;
#pragma unroll
    for (int c = 0; c < kCout; ++c) yp[(int64_t)c * Ho * Wo] = hardswish_relu(acc[c]);
  }
}

torch::Tensor conv_hardswish_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "float32 (N, C, H, W) CUDA input");
  TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32, "float32 parameters");
  TORCH_CHECK(weight.dim() == 4 && weight.size(0) == kCout && weight.size(1) == x.size(1) && x.size(1) <= kMaxCin &&
              weight.size(2) == 3 && weight.size(3) == 3 && bias.numel() == kCout,
              "this kernel is built for a (64, Cin <= 8, 3, 3) weight");
  TORCH_CHECK(x.size(2) >= 3 && x.size(3) >= 3, "input smaller than the kernel");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto w = weight.contiguous();
  auto b = bias.contiguous();
  const int64_t N = xc.size(0), Cin = xc.size(1), H = xc.size(2), W = xc.size(3);
  auto y = torch::empty({N, kCout, H - 2, W - 2}, xc.options());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // stream-ordered: a later call's copy cannot overtake this call's kernel
  C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(c_w, w.data_ptr<float>(), (size_t)w.numel() * sizeof(float), 0,
                                         cudaMemcpyDeviceToDevice, stream));
  C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(c_b, b.data_ptr<float>(), (size_t)kCout * sizeof(float), 0,
                                         cudaMemcpyDeviceToDevice, stream));
  const int64_t total = N * (H - 2) * (W - 2);
  if (total > 0) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t blocks = std::min<int64_t>((total + 127) / 128, (int64_t)sms * 16);
    if (Cin == 8) {
      conv3x3_hswish_relu<8><<<(unsigned)blocks, 128, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), (int)N,
                                                                   (int)Cin, (int)H, (int)W);
    } else {
      conv3x3_hswish_relu<0><<<(unsigned)blocks, 128, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), (int)N,
                                                                   (int)Cin, (int)H, (int)W);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return y;
}
"""

cpp_source = "torch::Tensor conv_hardswish_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

conv = load_inline(
    name="honest_l2_conv_hardswish_relu_constmem",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv_hardswish_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)  # the reference's layer, same seed
        if self.conv.kernel_size != (3, 3) or self.conv.stride != (1, 1) or self.conv.padding != (0, 0):
            raise NotImplementedError("the kernel covers 3x3, stride 1, unpadded convolutions")

    def forward(self, x):
        return conv.conv_hardswish_relu(x, self.conv.weight, self.conv.bias)
