// Swish (x * sigmoid(x)), elementwise: 16-byte loads and stores where the pointers allow, a grid-stride loop, a scalar tail.
#include "cuda_agent.h"

__device__ __forceinline__ float swish(float v) { return v / (1.f + __expf(-v)); }

__global__ void swish_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    v.x = swish(v.x); v.y = swish(v.y); v.z = swish(v.z); v.w = swish(v.w);
    y[i] = v;
  }
}

__global__ void swish_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    y[i] = swish(x[i]);
  }
}

static int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks > 132 * 16) blocks = 132 * 16;
  return blocks < 1 ? 1 : (int)blocks;
}

void swish_forward(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "swish expects float32 tensors");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "swish expects contiguous tensors");
  CA_CHECK(x.numel() == out.numel(), "input and output sizes differ");
  const int64_t n = x.numel();
  if (n == 0) return;
  const float* xp = x.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  const int threads = 256;
  int64_t done = 0;
  if (((uintptr_t)xp % 16 == 0) && ((uintptr_t)yp % 16 == 0)) {
    const int64_t n4 = n / 4;
    if (n4 > 0) {
      swish_vec4<<<grid_for(n4, threads), threads, 0, ca::stream()>>>(
          reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4);
    }
    done = n4 * 4;
  }
  if (done < n) swish_scalar<<<grid_for(n - done, threads), threads, 0, ca::stream()>>>(xp, yp, done, n);
}
CA_EXPORT(swish_forward);
