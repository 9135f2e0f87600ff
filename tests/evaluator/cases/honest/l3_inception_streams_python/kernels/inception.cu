// Building blocks of an Inception module, each launched on ca::stream() (whatever stream the caller made current):
//   conv1x1_into:   out[:, c_off : c_off + Co] = W x + b   (strided-batched SGEMM over the batch)
//   conv_kxk_into:  out[:, c_off : c_off + Co] = conv(x, W, pad) + b, stride 1 (im2col per image + SGEMM)
//   max_pool3x3_s1p1
// The output slice of image n is a Co x HW row-major block with row stride HW inside a (Ctot x HW) image.
#include "cuda_agent.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace {

// One cuBLAS handle per (device, stream): branches on different streams never share a handle's workspace.
cublasHandle_t blas_for(cudaStream_t stream) {
  static thread_local std::map<std::pair<int, cudaStream_t>, cublasHandle_t> handles;
  int dev = 0;
  CA_CUDA_CHECK(cudaGetDevice(&dev));
  cublasHandle_t& h = handles[{dev, stream}];
  if (!h) {
    CA_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
    CA_CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  }
  return h;
}

unsigned grid_for(long long work) {
  return (unsigned)std::max<long long>(1, std::min<long long>((work + 255) / 256, 132LL * 32));
}

// out[n, c_off + co, p] = b[co] for every n, co < Co, p < HW
__global__ void fill_bias_slice(float* __restrict__ out, const float* __restrict__ b, long long N, long long Co,
                                long long HW, long long Ctot, long long c_off) {
  const long long total = N * Co * HW;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long p = i % HW, co = (i / HW) % Co, n = i / (HW * Co);
    out[(n * Ctot + c_off + co) * HW + p] = b[co];
  }
}

// col[(ci * K + ky) * K + kx, y * W + x] = img[ci, y + ky - pad, x + kx - pad] (0 outside)
__global__ void im2col_kernel(const float* __restrict__ img, float* __restrict__ col, int C, int H, int W, int K,
                              int pad) {
  const long long HW = (long long)H * W;
  const long long total = (long long)C * K * K * HW;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long p = i % HW;
    const long long r = i / HW;
    const int kx = (int)(r % K), ky = (int)((r / K) % K), ci = (int)(r / (K * K));
    const int y = (int)(p / W) + ky - pad, x = (int)(p % W) + kx - pad;
    col[i] = (y >= 0 && y < H && x >= 0 && x < W) ? img[(long long)ci * HW + (long long)y * W + x] : 0.f;
  }
}

__global__ void max_pool3x3_kernel(const float* __restrict__ x, float* __restrict__ y, long long planes, int H, int W) {
  const long long HW = (long long)H * W;
  const long long total = planes * HW;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    const long long plane = i / HW, p = i % HW;
    const int r = (int)(p / W), c = (int)(p % W);
    const float* xp = x + plane * HW;
    float m = -INFINITY;
    for (int dy = -1; dy <= 1; ++dy) {
      const int rr = r + dy;
      if (rr < 0 || rr >= H) continue;
      for (int dx = -1; dx <= 1; ++dx) {
        const int cc = c + dx;
        if (cc < 0 || cc >= W) continue;
        const float v = xp[(long long)rr * W + cc];
        if (v > m || isnan(v)) m = v;
      }
    }
    y[i] = m;
  }
}

bool f32c(const ca::Tensor& t) { return t.dtype == ca::DType::Float32 && t.is_contiguous(); }

}  // namespace

void conv1x1_into(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor out, int64_t c_off) {
  CA_CHECK(f32c(x) && f32c(w) && f32c(b) && f32c(out), "contiguous float32 tensors expected");
  CA_CHECK(x.dim() == 4 && w.dim() == 4 && out.dim() == 4 && w.size(2) == 1 && w.size(3) == 1, "1x1 conv shapes");
  const long long N = x.size(0), Cin = x.size(1), HW = x.size(2) * x.size(3), Co = w.size(0), Ctot = out.size(1);
  CA_CHECK(w.size(1) == Cin && b.numel() == Co && out.size(0) == N && out.size(2) == x.size(2) &&
               out.size(3) == x.size(3) && c_off >= 0 && c_off + Co <= Ctot, "output slice out of range");
  CA_CHECK(HW < (1LL << 31) && Cin < (1LL << 31) && Co < (1LL << 31) && N < (1LL << 31), "sizes out of range");
  if (N * HW * Co == 0) return;
  cudaStream_t s = ca::stream();
  fill_bias_slice<<<grid_for(N * Co * HW), 256, 0, s>>>(out.data_ptr<float>(), b.data_ptr<float>(), N, Co, HW, Ctot,
                                                        c_off);
  // column-major view per image: C (HW x Co, ld HW) += X (HW x Cin, ld HW) * W^T (Cin x Co, ld Cin)
  const float alpha = 1.f, beta = 1.f;
  CA_CHECK(cublasSgemmStridedBatched(blas_for(s), CUBLAS_OP_N, CUBLAS_OP_N, (int)HW, (int)Co, (int)Cin, &alpha,
                                     x.data_ptr<float>(), (int)HW, Cin * HW, w.data_ptr<float>(), (int)Cin, 0, &beta,
                                     out.data_ptr<float>() + c_off * HW, (int)HW, Ctot * HW,
                                     (int)N) == CUBLAS_STATUS_SUCCESS,
           "cublasSgemmStridedBatched failed");
}
CA_EXPORT(conv1x1_into);

void conv_kxk_into(ca::Tensor x, ca::Tensor w, ca::Tensor b, ca::Tensor out, ca::Tensor col, int64_t c_off,
                   int64_t pad) {
  CA_CHECK(f32c(x) && f32c(w) && f32c(b) && f32c(out) && f32c(col), "contiguous float32 tensors expected");
  CA_CHECK(x.dim() == 4 && w.dim() == 4 && out.dim() == 4 && w.size(2) == w.size(3), "square KxK conv shapes");
  const long long N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3), HW = H * W;
  const long long Co = w.size(0), K = w.size(2), KK = Cin * K * K, Ctot = out.size(1);
  CA_CHECK(2 * pad == K - 1, "stride-1 'same' convolution expected (2 * pad == K - 1)");
  CA_CHECK(w.size(1) == Cin && b.numel() == Co && out.size(0) == N && out.size(2) == H && out.size(3) == W &&
               c_off >= 0 && c_off + Co <= Ctot, "output slice out of range");
  CA_CHECK(col.numel() >= KK * HW, "im2col buffer too small");
  CA_CHECK(HW < (1LL << 31) && KK < (1LL << 31), "sizes out of range");
  if (N * HW * Co == 0) return;
  cudaStream_t s = ca::stream();
  fill_bias_slice<<<grid_for(N * Co * HW), 256, 0, s>>>(out.data_ptr<float>(), b.data_ptr<float>(), N, Co, HW, Ctot,
                                                        c_off);
  cublasHandle_t h = blas_for(s);
  const float alpha = 1.f, beta = 1.f;
  for (long long n = 0; n < N; ++n) {  // one shared im2col buffer: images in sequence on this stream
    im2col_kernel<<<grid_for(KK * HW), 256, 0, s>>>(x.data_ptr<float>() + n * Cin * HW, col.data_ptr<float>(),
                                                    (int)Cin, (int)H, (int)W, (int)K, (int)pad);
    // C (HW x Co, ld HW) += col^T (HW x KK, ld HW) * W^T (KK x Co, ld KK)
    CA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)HW, (int)Co, (int)KK, &alpha, col.data_ptr<float>(),
                         (int)HW, w.data_ptr<float>(), (int)KK, &beta,
                         out.data_ptr<float>() + (n * Ctot + c_off) * HW, (int)HW) == CUBLAS_STATUS_SUCCESS,
             "cublasSgemm failed");
  }
}
CA_EXPORT(conv_kxk_into);

void max_pool3x3_s1p1(ca::Tensor x, ca::Tensor y) {
  CA_CHECK(f32c(x) && f32c(y) && x.dim() == 4 && x.numel() == y.numel(), "contiguous NCHW float32, same shape");
  const long long planes = x.size(0) * x.size(1);
  if (x.numel() == 0) return;
  max_pool3x3_kernel<<<grid_for(x.numel()), 256, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), planes,
                                                                   (int)x.size(2), (int)x.size(3));
}
CA_EXPORT(max_pool3x3_s1p1);
