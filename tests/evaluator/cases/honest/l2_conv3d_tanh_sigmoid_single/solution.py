import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

constexpr int kCout = 16, kThreads = 128;

// y = sigmoid(tanh((conv3d(x) + cb) * scale[c]) * mult[c]) for a 3x3x3 unpadded conv, one voxel per thread
__global__ __launch_bounds__(kThreads) void conv3d_tanh_sigmoid(const float* __restrict__ x, const float* __restrict__ w,
                                                                const float* __restrict__ cb, const float* __restrict__ scale,
                                                                const float* __restrict__ mult, float* __restrict__ y,
                                                                int N, int Cin, int D, int H, int W) {
  extern __shared__ float ws[];  // [Cin * 27][kCout]
  for (int i = threadIdx.x; i < Cin * 27 * kCout; i += kThreads) {
    const int c = i % kCout, r = i / kCout;
    ws[i] = w[(int64_t)c * Cin * 27 + r];
  }
  __syncthreads();
  const int Do = D - 2, Ho = H - 2, Wo = W - 2;
  const int64_t plane = (int64_t)Do * Ho * Wo, total = (int64_t)N * plane;
  for (int64_t p = blockIdx.x * (int64_t)kThreads + threadIdx.x; p < total; p += (int64_t)gridDim.x * kThreads) {
    const int ow = (int)(p % Wo), oh = (int)((p / Wo) % Ho), od = (int)((p / ((int64_t)Wo * Ho)) % Do);
    const int n = (int)(p / plane);
    float acc[kCout];
#pragma unroll
    for (int c = 0; c < kCout; ++c) acc[c] = 0.f;
    for (int ci = 0; ci < Cin; ++ci) {
      const float* xc = x + ((((int64_t)n * Cin + ci) * D + od) * H + oh) * W + ow;
      const float* wc = ws + ci * 27 * kCout;
#pragma unroll
      for (int k = 0; k < 27; ++k) {
        const float v = __ldg(xc + ((int64_t)(k / 9) * H + (k / 3) % 3) * W + (k % 3));
#pragma unroll
        for (int c = 0; c < kCout; ++c) acc[c] = fmaf(v, wc[k * kCout + c], acc[c]);
      }
    }
    float* yp = y + (int64_t)n * kCout * plane + ((int64_t)od * Ho + oh) * Wo + ow;
#pragma unroll
    for (int c = 0; c < kCout; ++c) {
      const float t = tanhf((acc[c] + cb[c]) * scale[c]) * mult[c];
      yp[(int64_t)c * plane] = 1.f / (1.f + expf(-t));
    }
  }
}

torch::Tensor conv3d_tanh_sigmoid_forward(torch::Tensor x, torch::Tensor w, torch::Tensor cb, torch::Tensor scale,
                                          torch::Tensor mult) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 5, "float32 (N, C, D, H, W) CUDA input");
  TORCH_CHECK(w.scalar_type() == torch::kFloat32 && w.dim() == 5 && w.size(0) == kCout && w.size(1) == x.size(1) &&
              w.size(2) == 3 && w.size(3) == 3 && w.size(4) == 3, "a (16, Cin, 3, 3, 3) float32 weight");
  TORCH_CHECK(cb.numel() == kCout && scale.numel() == kCout && mult.numel() == kCout, "per-channel parameters");
  TORCH_CHECK(x.size(1) <= 16 && x.size(2) >= 3 && x.size(3) >= 3 && x.size(4) >= 3, "sizes");
  const c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto wc = w.contiguous(), cbc = cb.contiguous(), sc = scale.contiguous(), mc = mult.contiguous();
  const int64_t N = xc.size(0), Cin = xc.size(1), D = xc.size(2), H = xc.size(3), W = xc.size(4);
  auto y = torch::empty({N, kCout, D - 2, H - 2, W - 2}, xc.options());
  const int64_t total = N * (D - 2) * (H - 2) * (W - 2);
  if (total == 0) return y;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, (int64_t)sms * 32);
  const size_t smem = (size_t)Cin * 27 * kCout * sizeof(float);
  conv3d_tanh_sigmoid<<<(unsigned)blocks, kThreads, smem, stream>>>(
      xc.data_ptr<float>(), wc.data_ptr<float>(), cbc.data_ptr<float>(), sc.data_ptr<float>(), mc.data_ptr<float>(),
      y.data_ptr<float>(), (int)N, (int)Cin, (int)D, (int)H, (int)W);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

cpp_source = ("torch::Tensor conv3d_tanh_sigmoid_forward(torch::Tensor x, torch::Tensor w, torch::Tensor cb, "
              "torch::Tensor scale, torch::Tensor mult);")

fused = load_inline(
    name="honest_l2_conv3d_tanh_sigmoid",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv3d_tanh_sigmoid_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor, bias_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)  # the reference's parameters, same order
        self.scaling_factor = nn.Parameter(torch.randn(bias_shape))
        self.bias = nn.Parameter(torch.randn(bias_shape))
        if self.conv.kernel_size != (3, 3, 3) or self.conv.stride != (1, 1, 1) or self.conv.padding != (0, 0, 0):
            raise NotImplementedError("the kernel covers a 3x3x3 unpadded conv")

    def forward(self, x):
        return fused.conv3d_tanh_sigmoid_forward(x, self.conv.weight, self.conv.bias, self.scaling_factor, self.bias)
