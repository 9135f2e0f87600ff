#include "cuda_agent.h"
#include <cfloat>

__device__ float block_reduce(float v, bool take_max, float* shared) {
  for (int off = 16; off > 0; off >>= 1) {
    float o = __shfl_down_sync(0xffffffff, v, off);
    v = take_max ? fmaxf(v, o) : v + o;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  v = (threadIdx.x < warps) ? shared[threadIdx.x] : (take_max ? -FLT_MAX : 0.0f);
  if (warp == 0) {
    for (int off = 16; off > 0; off >>= 1) {
      float o = __shfl_down_sync(0xffffffff, v, off);
      v = take_max ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  float r = shared[0];
  __syncthreads();
  return r;
}

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float shared[32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_reduce(m, true, shared);
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
  s = block_reduce(s, false, shared);
  float inv = 1.0f / s;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(row[j] - m) * inv;
}

void softmax(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dim() == 2 && x.is_contiguous() && x.dtype == ca::DType::Float32, "softmax expects a 2-D float32");
  softmax_kernel<<<(unsigned)x.size(0), 512, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), x.size(1));
}
CA_EXPORT(softmax);
