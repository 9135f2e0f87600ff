import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401  (the reference's import; nothing here calls it)
from torch.utils.cpp_extension import load_inline

lenet_cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

// y[n, co, py, px] = max over the 2x2 window of relu(conv(x)[n, co, 2py + dy, 2px + dx]) (valid conv, stride 1,
// then max_pool2d(kernel 2, stride 2), floor mode). One thread per pooled output.
template <int CIN, int COUT, int K>
__global__ void __launch_bounds__(128) conv_relu_pool_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                                             const float* __restrict__ b, float* __restrict__ y,
                                                             int64_t N, int H, int W) {
  __shared__ float sw[COUT * CIN * K * K];
  __shared__ float sb[COUT];
  for (int i = threadIdx.x; i < COUT * CIN * K * K; i += blockDim.x) sw[i] = w[i];
  for (int i = threadIdx.x; i < COUT; i += blockDim.x) sb[i] = b[i];
  __syncthreads();
  const int Hc = H - K + 1, Wc = W - K + 1;  // conv output
  const int Hp = Hc / 2, Wp = Wc / 2;        // pooled output
  const int64_t total = N * COUT * Hp * Wp;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int px = (int)(i % Wp), py = (int)((i / Wp) % Hp), co = (int)((i / ((int64_t)Wp * Hp)) % COUT);
    const int64_t n = i / ((int64_t)Wp * Hp * COUT);
    const float* xn = x + n * CIN * H * W;
    float best = -INFINITY;
#pragma unroll
    for (int dy = 0; dy < 2; ++dy) {
#pragma unroll
      for (int dx = 0; dx < 2; ++dx) {
        const int oy = 2 * py + dy, ox = 2 * px + dx;
        float acc = sb[co];
#pragma unroll
        for (int ci = 0; ci < CIN; ++ci)
#pragma unroll
          for (int ky = 0; ky < K; ++ky)
#pragma unroll
            for (int kx = 0; kx < K; ++kx)
              acc = fmaf(sw[((co * CIN + ci) * K + ky) * K + kx], xn[((int64_t)ci * H + oy + ky) * W + ox + kx], acc);
        best = fmaxf(best, acc);
      }
    }
    y[i] = fmaxf(best, 0.f);
  }
}

template <int CIN, int COUT, int K>
torch::Tensor conv_relu_pool_impl(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  TORCH_CHECK(x.size(1) == CIN && w.size(0) == COUT && w.size(1) == CIN && w.size(2) == K && w.size(3) == K &&
              b.numel() == COUT, "conv_relu_pool: unexpected shapes");
  const int64_t N = x.size(0);
  const int H = (int)x.size(2), W = (int)x.size(3);
  TORCH_CHECK(H >= K && W >= K, "conv_relu_pool: input smaller than the kernel");
  auto y = torch::empty({N, COUT, (H - K + 1) / 2, (W - K + 1) / 2}, x.options());
  const int64_t total = y.numel();
  if (total == 0) return y;
  const int64_t cap = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
  const unsigned blocks = (unsigned)std::min<int64_t>((total + 127) / 128, cap);
  conv_relu_pool_kernel<CIN, COUT, K><<<blocks, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), N, H, W);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void check_f32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), what,
              ": contiguous float32 CUDA tensor expected");
}

torch::Tensor conv_relu_pool(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  check_f32(x, "x");
  check_f32(w, "weight");
  check_f32(b, "bias");
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "conv_relu_pool: NCHW input and OIHW weight expected");
  const c10::cuda::CUDAGuard guard(x.device());
  if (w.size(1) == 1 && w.size(0) == 6 && w.size(2) == 5) return conv_relu_pool_impl<1, 6, 5>(x, w, b);
  if (w.size(1) == 6 && w.size(0) == 16 && w.size(2) == 5) return conv_relu_pool_impl<6, 16, 5>(x, w, b);
  TORCH_CHECK(false, "conv_relu_pool: only LeNet-5's two stages are instantiated");
  return torch::Tensor();
}

// y[r, j] = act(b[j] + sum_k x[r, k] w[j, k]); one thread per output element.
__global__ void linear_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                              float* __restrict__ y, int64_t rows, int64_t K, int64_t N, bool relu) {
  const int64_t total = rows * N;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / N, j = i % N;
    const float* xr = x + r * K;
    const float* wj = w + j * K;
    float acc = b[j];
    for (int64_t k = 0; k < K; ++k) acc = fmaf(xr[k], wj[k], acc);
    y[i] = relu ? fmaxf(acc, 0.f) : acc;
  }
}

torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu) {
  check_f32(x, "x");
  check_f32(w, "weight");
  check_f32(b, "bias");
  TORCH_CHECK(w.dim() == 2 && x.numel() % w.size(1) == 0 && b.numel() == w.size(0), "linear: shapes");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t K = w.size(1), N = w.size(0), rows = x.numel() / K;
  auto y = torch::empty({rows, N}, x.options());
  if (y.numel() == 0) return y;
  const int64_t cap = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
  const unsigned blocks = (unsigned)std::min<int64_t>((y.numel() + 255) / 256, cap);
  linear_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), w.data_ptr<float>(),
                                                                      b.data_ptr<float>(), y.data_ptr<float>(), rows,
                                                                      K, N, relu);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

lenet_cpp = """
torch::Tensor conv_relu_pool(torch::Tensor x, torch::Tensor w, torch::Tensor b);
torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu);
"""

lenet = load_inline(
    name="honest_l3_lenet5_fused",
    cpp_sources=lenet_cpp,
    cuda_sources=lenet_cuda,
    functions=["conv_relu_pool", "linear"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=1, out_channels=6, kernel_size=5, stride=1)
        self.conv2 = nn.Conv2d(in_channels=6, out_channels=16, kernel_size=5, stride=1)
        self.fc1 = nn.Linear(in_features=16 * 5 * 5, out_features=120)
        self.fc2 = nn.Linear(in_features=120, out_features=84)
        self.fc3 = nn.Linear(in_features=84, out_features=num_classes)

    def forward(self, x):
        x = lenet.conv_relu_pool(x, self.conv1.weight, self.conv1.bias)
        x = lenet.conv_relu_pool(x, self.conv2.weight, self.conv2.bias)
        x = x.view(-1, 16 * 5 * 5)
        x = lenet.linear(x, self.fc1.weight, self.fc1.bias, True)
        x = lenet.linear(x, self.fc2.weight, self.fc2.bias, True)
        return lenet.linear(x, self.fc3.weight, self.fc3.bias, False)
