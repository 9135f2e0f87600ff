// A deep MLP as a chain of our own tiled-GEMM kernels (y = x W^T + b, ReLU on all but the last layer), recorded
// once with stream capture into a CUDA graph and replayed on the caller's stream.
#include "cuda_agent.h"

#include <vector>

namespace {

constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4, THREADS = (BM / TM) * (BN / TN);

// C[M, N] = act(A[M, K] @ W[N, K]^T + bias[N]); W in nn.Linear's own layout.
template <bool RELU>
__global__ void __launch_bounds__(THREADS) linear_tiled(const float* __restrict__ A, const float* __restrict__ W,
                                                        const float* __restrict__ bias, float* __restrict__ C,
                                                        long long M, long long N, long long K) {
  __shared__ float As[BK][BM + 4];
  __shared__ float Ws[BK][BN + 4];
  const int tid = threadIdx.x, tx = tid % (BN / TN), ty = tid / (BN / TN);
  const long long m0 = (long long)blockIdx.y * BM, n0 = (long long)blockIdx.x * BN;
  float acc[TM][TN] = {};
  for (long long k0 = 0; k0 < K; k0 += BK) {
    for (int e = tid; e < BM * BK; e += THREADS) {
      const int r = e / BK, c = e % BK;
      const long long gm = m0 + r, gk = k0 + c;
      As[c][r] = (gm < M && gk < K) ? A[gm * K + gk] : 0.f;
    }
    for (int e = tid; e < BN * BK; e += THREADS) {
      const int r = e / BK, c = e % BK;
      const long long gn = n0 + r, gk = k0 + c;
      Ws[c][r] = (gn < N && gk < K) ? W[gn * K + gk] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Ws[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long gm = m0 + ty * TM + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const long long gn = n0 + tx * TN + j;
      if (gn >= N) continue;
      float v = acc[i][j] + bias[gn];
      if (RELU) v = v < 0.f ? 0.f : v;
      C[gm * N + gn] = v;
    }
  }
}

struct Layer {
  const float* in;
  const float* w;
  const float* b;
  float* out;
  long long M, N, K;
  bool relu;
};

void launch(const Layer& L, cudaStream_t s) {
  const dim3 grid((unsigned)((L.N + BN - 1) / BN), (unsigned)((L.M + BM - 1) / BM));
  if (L.relu) {
    linear_tiled<true><<<grid, THREADS, 0, s>>>(L.in, L.w, L.b, L.out, L.M, L.N, L.K);
  } else {
    linear_tiled<false><<<grid, THREADS, 0, s>>>(L.in, L.w, L.b, L.out, L.M, L.N, L.K);
  }
}

struct GraphCache {
  cudaStream_t capture_stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphNode_t first = nullptr, last = nullptr;
  cudaKernelNodeParams first_params{}, last_params{};
  std::vector<uintptr_t> key;  // everything baked into the graph except the input and output pointers
  std::vector<Layer> layers;

  void reset() {
    if (exec) cudaGraphExecDestroy(exec);  // an in-flight launch completes first; CUDA frees it afterwards
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
    first = last = nullptr;
  }

  void capture() {
    if (!capture_stream) CA_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
    CA_CUDA_CHECK(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
    for (const Layer& L : layers) launch(L, capture_stream);
    const cudaError_t launch_err = cudaGetLastError();
    cudaGraph_t g = nullptr;
    const cudaError_t end_err = cudaStreamEndCapture(capture_stream, &g);
    CA_CUDA_CHECK(launch_err);
    CA_CUDA_CHECK(end_err);
    graph = g;
    CA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    // Find the nodes that read the model's input and write its output (they are updated on every call).
    size_t count = 0;
    CA_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CA_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      CA_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeKernel) continue;
      cudaKernelNodeParams p{};
      CA_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &p));
      const float* in = *static_cast<const float**>(p.kernelParams[0]);
      float* out = *static_cast<float**>(p.kernelParams[3]);
      if (in == layers.front().in) {
        first = node;
        first_params = p;
      }
      if (out == layers.back().out) {
        last = node;
        last_params = p;
      }
    }
    CA_CHECK(first && last, "could not find the graph's input and output nodes");
  }

  void set_io(cudaGraphNode_t node, cudaKernelNodeParams p, Layer L) {
    void* args[] = {&L.in, &L.w, &L.b, &L.out, &L.M, &L.N, &L.K};
    p.kernelParams = args;
    p.extra = nullptr;
    CA_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
  }
};

GraphCache& cache_for_device() {
  static thread_local GraphCache caches[64];
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  return caches[dev];
}

bool f32c(const ca::Tensor& t) { return t.dtype == ca::DType::Float32 && t.is_contiguous(); }

}  // namespace

void mlp_graph_forward(ca::Tensor x, ca::Tensor w0, ca::Tensor b0, ca::Tensor wh, ca::Tensor bh, ca::Tensor wl,
                       ca::Tensor bl, ca::Tensor scratch, ca::Tensor out) {
  CA_CHECK(f32c(x) && f32c(w0) && f32c(b0) && f32c(wh) && f32c(bh) && f32c(wl) && f32c(bl) && f32c(scratch) &&
               f32c(out), "contiguous float32 tensors expected");
  CA_CHECK(x.dim() == 2 && w0.dim() == 2 && wh.dim() == 3 && bh.dim() == 2 && wl.dim() == 2 && scratch.dim() == 3,
           "layer shapes");
  const long long M = x.size(0), In = x.size(1), H = w0.size(0), L = wh.size(0), Out = wl.size(0);
  CA_CHECK(w0.size(1) == In && b0.numel() == H, "first layer shape");
  CA_CHECK(wh.size(1) == H && wh.size(2) == H && bh.size(0) == L && bh.size(1) == H, "hidden layer shapes");
  CA_CHECK(wl.size(1) == H && bl.numel() == Out, "last layer shape");
  CA_CHECK(scratch.size(0) == 2 && scratch.size(1) == M && scratch.size(2) == H, "scratch must be (2, batch, H)");
  CA_CHECK(out.dim() == 2 && out.size(0) == M && out.size(1) == Out, "output shape");
  CA_CHECK((M + BM - 1) / BM <= 65535, "batch too large for grid.y");
  if (M == 0) return;

  float* s0 = scratch.data_ptr<float>();
  float* s1 = s0 + M * H;
  std::vector<Layer> layers;
  layers.push_back({x.data_ptr<float>(), w0.data_ptr<float>(), b0.data_ptr<float>(), s0, M, H, In, true});
  for (long long i = 0; i < L; ++i) {
    float* src = (i % 2 == 0) ? s0 : s1;
    float* dst = (i % 2 == 0) ? s1 : s0;
    layers.push_back({src, wh.data_ptr<float>() + i * H * H, bh.data_ptr<float>() + i * H, dst, M, H, H, true});
  }
  layers.push_back({(L % 2 == 0) ? s0 : s1, wl.data_ptr<float>(), bl.data_ptr<float>(), out.data_ptr<float>(), M,
                    Out, H, false});

  std::vector<uintptr_t> key = {(uintptr_t)M, (uintptr_t)In, (uintptr_t)H, (uintptr_t)L, (uintptr_t)Out,
                                (uintptr_t)w0.data, (uintptr_t)b0.data, (uintptr_t)wh.data, (uintptr_t)bh.data,
                                (uintptr_t)wl.data, (uintptr_t)bl.data, (uintptr_t)scratch.data};
  GraphCache& g = cache_for_device();
  if (g.exec == nullptr || g.key != key) {
    g.reset();
    g.layers = layers;
    g.capture();
    g.key = key;
  }
  if (g.first == g.last) {  // a single node reads the input and writes the output
    Layer only = layers.front();
    only.out = layers.back().out;
    g.set_io(g.first, g.first_params, only);
  } else {
    g.set_io(g.first, g.first_params, layers.front());
    g.set_io(g.last, g.last_params, layers.back());
  }
  CA_CUDA_CHECK(cudaGraphLaunch(g.exec, ca::stream()));
}
CA_EXPORT(mlp_graph_forward);
