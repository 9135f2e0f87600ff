// A vanilla RNN (h_t = tanh([x_t, h_{t-1}] W^T + b), y_t = h_t Wo^T + bo) as: one GEMM for every x_t Wx^T, the S
// recurrent steps as our own kernel (recorded once into a CUDA graph, replayed per call), one GEMM for every y_t.
#include "cuda_agent.h"

#include <cublas_v2.h>

#include <vector>

namespace {

constexpr int kWarps = 16, kThreads = 32 * kWarps;

cublasHandle_t cublas_handle() {
  static thread_local cublasHandle_t handles[64] = {};
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  if (handles[device] == nullptr) CA_CHECK(cublasCreate(&handles[device]) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
  return handles[device];
}

// h_out[b, j] = tanh(P[b, j] + bias[j] + sum_k h_prev[b, k] * whT[k, j]); grid (ceil(H / 32), B), 16 warps split
// k (for H = 256, 16 independent loads per thread, all in flight: the step is latency bound, not bandwidth bound)
__global__ __launch_bounds__(kThreads) void rnn_step(const float* __restrict__ P, const float* __restrict__ bias,
                                                     const float* __restrict__ whT, const float* __restrict__ h_prev,
                                                     float* __restrict__ h_out, int H) {
  extern __shared__ float h_row[];
  __shared__ float partial[kWarps][32];
  const int b = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int j = blockIdx.x * 32 + lane;
  for (int k = threadIdx.x; k < H; k += kThreads) h_row[k] = h_prev[(int64_t)b * H + k];
  __syncthreads();
  float acc = 0.f;
  if (j < H) {
#pragma unroll 16
    for (int k = warp; k < H; k += kWarps) acc = fmaf(h_row[k], __ldg(whT + (int64_t)k * H + j), acc);
  }
  partial[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && j < H) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += partial[w][lane];
    const int64_t o = (int64_t)b * H + j;
    h_out[o] = tanhf(P[o] + bias[j] + s);
  }
}

__global__ void add_bias_rows(float* __restrict__ y, const float* __restrict__ bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] += bias[i % cols];
}

void gemm_xwT(cublasHandle_t h, const float* x, const float* w, float* y, int64_t M, int64_t N, int64_t K) {
  // y (M, N) = x (M, K) @ w (N, K)^T, row-major
  const float alpha = 1.f, beta = 0.f;
  CA_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, w, (int)K, x, (int)K, &beta, y,
                       (int)N) == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed");
}

struct StepGraph {
  cudaStream_t capture_stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<uintptr_t> key;

  void reset() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }

  void capture(const float* P, const float* bias, const float* whT, const float* hinit, float* hs, int64_t S,
               int64_t B, int64_t H) {
    if (!capture_stream) CA_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
    const dim3 grid((unsigned)((H + 31) / 32), (unsigned)B);
    const size_t smem = (size_t)H * sizeof(float);
    CA_CUDA_CHECK(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
    for (int64_t t = 0; t < S; ++t) {
      const float* prev = t == 0 ? hinit : hs + (t - 1) * B * H;
      rnn_step<<<grid, kThreads, smem, capture_stream>>>(P + t * B * H, bias, whT, prev, hs + t * B * H, (int)H);
    }
    const cudaError_t launch_err = cudaGetLastError();
    cudaGraph_t g = nullptr;
    const cudaError_t end_err = cudaStreamEndCapture(capture_stream, &g);
    CA_CUDA_CHECK(launch_err);
    CA_CUDA_CHECK(end_err);
    graph = g;
    CA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  }
};

StepGraph& graph_for_device() {
  static thread_local StepGraph graphs[64];
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  return graphs[dev];
}

bool f32c(const ca::Tensor& t) { return t.dtype == ca::DType::Float32 && t.is_contiguous(); }

}  // namespace

void rnn_forward(ca::Tensor x, ca::Tensor h0, ca::Tensor wx, ca::Tensor b_ih, ca::Tensor whT, ca::Tensor wo,
                 ca::Tensor bo, ca::Tensor proj, ca::Tensor hs, ca::Tensor hinit, ca::Tensor out) {
  CA_CHECK(f32c(x) && f32c(h0) && f32c(wx) && f32c(b_ih) && f32c(whT) && f32c(wo) && f32c(bo) && f32c(proj) &&
               f32c(hs) && f32c(hinit) && f32c(out), "contiguous float32 tensors expected");
  CA_CHECK(x.dim() == 3 && h0.dim() == 2, "x (S, B, I), h0 (B, H)");
  const int64_t S = x.size(0), B = x.size(1), I = x.size(2), H = whT.size(0), O = wo.size(0);
  CA_CHECK(wx.dim() == 2 && wx.size(0) == H && wx.size(1) == I, "wx (H, I)");
  CA_CHECK(whT.dim() == 2 && whT.size(1) == H && b_ih.numel() == H, "whT (H, H), b_ih (H,)");
  CA_CHECK(wo.dim() == 2 && wo.size(1) == H && bo.numel() == O, "wo (O, H), bo (O,)");
  CA_CHECK(h0.size(0) == B && h0.size(1) == H, "h0 (B, H)");
  CA_CHECK(proj.numel() == S * B * H && hs.numel() == S * B * H && hinit.numel() == B * H, "scratch sizes");
  CA_CHECK(out.numel() == S * B * O, "out (S, B, O)");
  CA_CHECK(S * B < (1LL << 31) && B < 65536 && H <= 12288 && I < (1LL << 31), "sizes out of range");
  if (S == 0 || B == 0) return;
  cudaStream_t stream = ca::stream();
  cublasHandle_t h = cublas_handle();
  CA_CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  CA_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS, "cublasSetMathMode failed");
  gemm_xwT(h, x.data_ptr<float>(), wx.data_ptr<float>(), proj.data_ptr<float>(), S * B, H, I);
  CA_CUDA_CHECK(cudaMemcpyAsync(hinit.data, h0.data, (size_t)(B * H) * sizeof(float), cudaMemcpyDeviceToDevice, stream));

  std::vector<uintptr_t> key = {(uintptr_t)S, (uintptr_t)B, (uintptr_t)H, (uintptr_t)proj.data, (uintptr_t)b_ih.data,
                                (uintptr_t)whT.data, (uintptr_t)hinit.data, (uintptr_t)hs.data};
  StepGraph& g = graph_for_device();
  if (g.exec == nullptr || g.key != key) {
    g.reset();
    g.capture(proj.data_ptr<float>(), b_ih.data_ptr<float>(), whT.data_ptr<float>(), hinit.data_ptr<float>(),
              hs.data_ptr<float>(), S, B, H);
    g.key = key;
  }
  CA_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));

  gemm_xwT(h, hs.data_ptr<float>(), wo.data_ptr<float>(), out.data_ptr<float>(), S * B, O, H);
  add_bias_rows<<<1024, 256, 0, stream>>>(out.data_ptr<float>(), bo.data_ptr<float>(), S * B, O);
}
CA_EXPORT(rnn_forward);
