// out[i, j] = a[i] * b[i, j] (diag(a) @ b without forming the diagonal matrix). The rows are split in two halves:
// the first on the caller's stream, the second on a side stream forked from it and joined back with events.
#include "cuda_agent.h"

#include <algorithm>

namespace {

constexpr int kThreads = 256;

__global__ __launch_bounds__(kThreads) void scale_rows_vec4(const float* __restrict__ a, const float4* __restrict__ b,
                                                            float4* __restrict__ out, int64_t row0, int64_t rows,
                                                            int64_t cols4) {
  const int64_t n = rows * cols4, base = row0 * cols4;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float s = __ldg(a + row0 + i / cols4);
    float4 v = b[base + i];
    v.x *= s;
    v.y *= s;
    v.z *= s;
    v.w *= s;
    out[base + i] = v;
  }
}

__global__ __launch_bounds__(kThreads) void scale_rows(const float* __restrict__ a, const float* __restrict__ b,
                                                       float* __restrict__ out, int64_t row0, int64_t rows,
                                                       int64_t cols) {
  const int64_t n = rows * cols, base = row0 * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    out[base + i] = __ldg(a + row0 + i / cols) * b[base + i];
  }
}

struct Side {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  int sms = 0;
};

Side& side_for_device() {
  static Side sides[64];
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  Side& s = sides[dev];
  if (s.stream == nullptr) {
    CA_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    CA_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    CA_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
    CA_CUDA_CHECK(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, dev));
  }
  return s;
}

void launch_half(const float* a, const float* b, float* out, int64_t row0, int64_t rows, int64_t cols, bool vec,
                 int sms, cudaStream_t stream) {
  if (rows <= 0) return;
  const int64_t work = vec ? rows * (cols / 4) : rows * cols;
  const int64_t blocks = std::min<int64_t>((work + kThreads - 1) / kThreads, (int64_t)sms * 8);
  if (vec) {
    scale_rows_vec4<<<(unsigned)blocks, kThreads, 0, stream>>>(a, reinterpret_cast<const float4*>(b),
                                                               reinterpret_cast<float4*>(out), row0, rows, cols / 4);
  } else {
    scale_rows<<<(unsigned)blocks, kThreads, 0, stream>>>(a, b, out, row0, rows, cols);
  }
}

}  // namespace

void diag_matmul(ca::Tensor a, ca::Tensor b, ca::Tensor out) {
  CA_CHECK(a.dtype == ca::DType::Float32 && b.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32,
           "float32 expected");
  CA_CHECK(a.dim() == 1 && b.dim() == 2 && out.dim() == 2, "A is (N,), B and out are (N, M)");
  CA_CHECK(a.size(0) == b.size(0) && out.size(0) == b.size(0) && out.size(1) == b.size(1), "shape mismatch");
  CA_CHECK(a.is_contiguous() && b.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  const int64_t rows = b.size(0), cols = b.size(1);
  if (rows == 0 || cols == 0) return;
  const bool vec = cols % 4 == 0 && ((reinterpret_cast<uintptr_t>(b.data) | reinterpret_cast<uintptr_t>(out.data)) & 15) == 0;
  Side& side = side_for_device();
  cudaStream_t main = ca::stream();
  const int64_t first = rows / 2;
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* po = out.data_ptr<float>();
  // fork: the side stream starts after everything already queued on the caller's stream (the inputs are ready)
  CA_CUDA_CHECK(cudaEventRecord(side.fork, main));
  CA_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.fork, 0));
  launch_half(pa, pb, po, 0, first, cols, vec, side.sms, main);
  launch_half(pa, pb, po, first, rows - first, cols, vec, side.sms, side.stream);
  // join: the caller's stream waits for the second half before anything it runs next (the output copy)
  CA_CUDA_CHECK(cudaEventRecord(side.join, side.stream));
  CA_CUDA_CHECK(cudaStreamWaitEvent(main, side.join, 0));
}
CA_EXPORT(diag_matmul);
