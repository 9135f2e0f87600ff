// SqueezeNet Fire module, NCHW float32: squeeze (1x1) + ReLU, then expand1x1 + ReLU and expand3x3 (pad 1) + ReLU
// written into the two channel halves of one output. The expand branches are independent: fork/join on two streams.
#include "cuda_agent.h"

#include <algorithm>

namespace {

constexpr int kThreads = 256;
constexpr int kGroup = 16;  // output channels per thread in the expand kernels

// s[n, cs, p] = relu(b[cs] + sum_ci w[cs, ci] x[n, ci, p]); one thread per (n, p), all squeeze channels.
__global__ void __launch_bounds__(kThreads) squeeze_relu(const float* __restrict__ x, const float* __restrict__ w,
                                                         const float* __restrict__ b, float* __restrict__ s,
                                                         int N, int Cin, int Cs, long long HW) {
  extern __shared__ float sw[];  // Cs * Cin weights, then Cs biases
  for (int i = threadIdx.x; i < Cs * Cin + Cs; i += kThreads) sw[i] = i < Cs * Cin ? w[i] : b[i - Cs * Cin];
  __syncthreads();
  const long long total = (long long)N * HW;
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < total; i += (long long)gridDim.x * kThreads) {
    const long long n = i / HW, p = i % HW;
    const float* xp = x + n * Cin * HW + p;
    float* sp = s + n * Cs * HW + p;
    for (int cs = 0; cs < Cs; ++cs) {
      float acc = sw[Cs * Cin + cs];
      for (int ci = 0; ci < Cin; ++ci) acc = fmaf(sw[cs * Cin + ci], xp[ci * HW], acc);
      sp[cs * HW] = fmaxf(acc, 0.f);
    }
  }
}

// out[n, c_off + co, y, x] = relu(b[co] + sum_{cs, ky, kx} w[co, cs, ky, kx] s[n, cs, y + ky - P, x + kx - P])
// for K = 1 (P = 0) and K = 3 (P = 1). One thread per (n, group of kGroup output channels, pixel).
template <int K>
__global__ void __launch_bounds__(kThreads) expand_relu(const float* __restrict__ s, const float* __restrict__ w,
                                                        const float* __restrict__ b, float* __restrict__ out,
                                                        int N, int Cs, int Ce, int H, int W, int c_off, int Ctot) {
  constexpr int P = K / 2;
  extern __shared__ float sw[];  // Ce * Cs * K * K weights, then Ce biases
  const int nw = Ce * Cs * K * K;
  for (int i = threadIdx.x; i < nw + Ce; i += kThreads) sw[i] = i < nw ? w[i] : b[i - nw];
  __syncthreads();
  const long long HW = (long long)H * W;
  const int groups = (Ce + kGroup - 1) / kGroup;
  const long long total = (long long)N * groups * HW;
  for (long long i = (long long)blockIdx.x * kThreads + threadIdx.x; i < total; i += (long long)gridDim.x * kThreads) {
    const long long p = i % HW;
    const int g = (int)((i / HW) % groups);
    const long long n = i / (HW * groups);
    const int y = (int)(p / W), xw = (int)(p % W);
    float acc[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) acc[j] = g * kGroup + j < Ce ? sw[nw + g * kGroup + j] : 0.f;
    const float* sn = s + n * Cs * HW;
    for (int cs = 0; cs < Cs; ++cs) {
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const int yy = y + ky - P;
        if (yy < 0 || yy >= H) continue;
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const int xx = xw + kx - P;
          if (xx < 0 || xx >= W) continue;
          const float v = sn[cs * HW + (long long)yy * W + xx];
#pragma unroll
          for (int j = 0; j < kGroup; ++j) {
            const int co = g * kGroup + j;
            if (co < Ce) acc[j] = fmaf(sw[((co * Cs + cs) * K + ky) * K + kx], v, acc[j]);
          }
        }
      }
    }
    float* op = out + (n * Ctot + c_off) * HW + p;
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      const int co = g * kGroup + j;
      if (co < Ce) op[(long long)co * HW] = fmaxf(acc[j], 0.f);
    }
  }
}

struct ForkJoin {
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};

ForkJoin& fork_join_for_device() {
  static ForkJoin per_device[64];
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  CA_CHECK(dev >= 0 && dev < 64, "device index out of range");
  ForkJoin& fj = per_device[dev];
  if (!fj.side) {
    CA_CUDA_CHECK(cudaStreamCreateWithFlags(&fj.side, cudaStreamNonBlocking));
    CA_CUDA_CHECK(cudaEventCreateWithFlags(&fj.fork, cudaEventDisableTiming));
    CA_CUDA_CHECK(cudaEventCreateWithFlags(&fj.join, cudaEventDisableTiming));
  }
  return fj;
}

unsigned blocks_for(long long work) {
  return (unsigned)std::max<long long>(1, std::min<long long>((work + kThreads - 1) / kThreads, 132LL * 16));
}

bool f32c(const ca::Tensor& t) { return t.dtype == ca::DType::Float32 && t.is_contiguous(); }

}  // namespace

void fire_forward(ca::Tensor x, ca::Tensor w_sq, ca::Tensor b_sq, ca::Tensor w_e1, ca::Tensor b_e1, ca::Tensor w_e3,
                  ca::Tensor b_e3, ca::Tensor squeezed, ca::Tensor out) {
  CA_CHECK(f32c(x) && f32c(w_sq) && f32c(b_sq) && f32c(w_e1) && f32c(b_e1) && f32c(w_e3) && f32c(b_e3) &&
               f32c(squeezed) && f32c(out), "contiguous float32 tensors expected");
  CA_CHECK(x.dim() == 4 && squeezed.dim() == 4 && out.dim() == 4, "NCHW tensors");
  const int N = (int)x.size(0), Cin = (int)x.size(1), H = (int)x.size(2), W = (int)x.size(3);
  const int Cs = (int)w_sq.size(0), E1 = (int)w_e1.size(0), E3 = (int)w_e3.size(0);
  CA_CHECK(w_sq.size(1) == Cin && w_sq.size(2) == 1 && w_sq.size(3) == 1 && b_sq.numel() == Cs, "squeeze shape");
  CA_CHECK(w_e1.size(1) == Cs && w_e1.size(2) == 1 && w_e1.size(3) == 1 && b_e1.numel() == E1, "expand1x1 shape");
  CA_CHECK(w_e3.size(1) == Cs && w_e3.size(2) == 3 && w_e3.size(3) == 3 && b_e3.numel() == E3, "expand3x3 shape");
  CA_CHECK(squeezed.size(0) == N && squeezed.size(1) == Cs && squeezed.size(2) == H && squeezed.size(3) == W,
           "squeeze scratch shape");
  CA_CHECK(out.size(0) == N && out.size(1) == E1 + E3 && out.size(2) == H && out.size(3) == W, "output shape");
  const long long HW = (long long)H * W;
  if ((long long)N * HW == 0) return;
  const size_t smem_sq = sizeof(float) * (size_t)(Cs * Cin + Cs);
  const size_t smem_e1 = sizeof(float) * (size_t)(E1 * Cs + E1);
  const size_t smem_e3 = sizeof(float) * (size_t)(E3 * Cs * 9 + E3);
  CA_CHECK(smem_sq <= 48 * 1024 && smem_e1 <= 48 * 1024 && smem_e3 <= 48 * 1024, "weights too large for shared memory");

  cudaStream_t main = ca::stream();
  ForkJoin& fj = fork_join_for_device();
  squeeze_relu<<<blocks_for((long long)N * HW), kThreads, smem_sq, main>>>(
      x.data_ptr<float>(), w_sq.data_ptr<float>(), b_sq.data_ptr<float>(), squeezed.data_ptr<float>(), N, Cin, Cs, HW);
  // fork: the side stream starts once the squeeze output is ready
  CA_CUDA_CHECK(cudaEventRecord(fj.fork, main));
  CA_CUDA_CHECK(cudaStreamWaitEvent(fj.side, fj.fork, 0));
  const long long g3 = (long long)N * ((E3 + kGroup - 1) / kGroup) * HW;
  expand_relu<3><<<blocks_for(g3), kThreads, smem_e3, fj.side>>>(squeezed.data_ptr<float>(), w_e3.data_ptr<float>(),
                                                                b_e3.data_ptr<float>(), out.data_ptr<float>(), N, Cs,
                                                                E3, H, W, E1, E1 + E3);
  const long long g1 = (long long)N * ((E1 + kGroup - 1) / kGroup) * HW;
  expand_relu<1><<<blocks_for(g1), kThreads, smem_e1, main>>>(squeezed.data_ptr<float>(), w_e1.data_ptr<float>(),
                                                             b_e1.data_ptr<float>(), out.data_ptr<float>(), N, Cs, E1,
                                                             H, W, 0, E1 + E3);
  // join: the caller's stream waits for the side branch before anything after this call
  CA_CUDA_CHECK(cudaEventRecord(fj.join, fj.side));
  CA_CUDA_CHECK(cudaStreamWaitEvent(main, fj.join, 0));
}
CA_EXPORT(fire_forward);
