import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float sq_diff(float a, float b) {
  const float d = a - b;
  return d * d;
}

// Sum of (p - t)^2 over n elements into *acc (zeroed by the caller): float4 body when `vec`, scalar tail.
__global__ void __launch_bounds__(256) sq_err_sum_kernel(const float* __restrict__ p, const float* __restrict__ t,
                                                         float* __restrict__ acc, int64_t n, bool vec) {
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  float sum = 0.f;
  int64_t done = 0;
  if (vec) {
    const int64_t n4 = n / 4;
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const float4* t4 = reinterpret_cast<const float4*>(t);
    for (int64_t i = tid; i < n4; i += stride) {
      const float4 a = p4[i], b = t4[i];
      sum += sq_diff(a.x, b.x) + sq_diff(a.y, b.y) + sq_diff(a.z, b.z) + sq_diff(a.w, b.w);
    }
    done = n4 * 4;
  }
  for (int64_t i = done + tid; i < n; i += stride) sum += sq_diff(p[i], t[i]);

  __shared__ float warp_sums[32];
  sum = warp_sum(sum);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.f;
    sum = warp_sum(sum);
    if (lane == 0) atomicAdd(acc, sum);
  }
}

__global__ void mean_finalize_kernel(const float* __restrict__ acc, float* __restrict__ out, int64_t n) {
  out[0] = acc[0] / (float)n;
}

torch::Tensor mse_loss(torch::Tensor predictions, torch::Tensor targets) {
  TORCH_CHECK(predictions.is_cuda() && targets.is_cuda(), "mse_loss: CUDA tensors expected");
  TORCH_CHECK(predictions.scalar_type() == torch::kFloat32 && targets.scalar_type() == torch::kFloat32,
              "mse_loss: float32 expected");
  TORCH_CHECK(predictions.sizes() == targets.sizes(), "mse_loss: predictions and targets must have one shape");
  TORCH_CHECK(predictions.is_contiguous() && targets.is_contiguous(), "mse_loss: contiguous inputs expected");
  const c10::cuda::CUDAGuard guard(predictions.device());
  const int64_t n = predictions.numel();
  auto out = torch::empty({}, predictions.options());
  auto acc = torch::zeros({1}, predictions.options());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (n > 0) {
    const bool vec = ((reinterpret_cast<uintptr_t>(predictions.data_ptr()) |
                       reinterpret_cast<uintptr_t>(targets.data_ptr())) & 15) == 0;
    const int threads = 256;
    int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    int64_t blocks = ((vec ? n / 4 : n) + threads - 1) / threads;
    blocks = std::max<int64_t>(1, std::min<int64_t>(blocks, (int64_t)sms * 32));  // short per-thread sums
    sq_err_sum_kernel<<<(unsigned)blocks, threads, 0, stream>>>(predictions.data_ptr<float>(),
                                                                targets.data_ptr<float>(), acc.data_ptr<float>(),
                                                                n, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // n == 0: 0 / 0 = NaN, as torch.mean of an empty tensor.
  mean_finalize_kernel<<<1, 1, 0, stream>>>(acc.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

cpp_source = "torch::Tensor mse_loss(torch::Tensor predictions, torch::Tensor targets);"

mse = load_inline(
    name="honest_l1_mse_loss_atomics",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["mse_loss"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return mse.mse_loss(predictions, targets)
