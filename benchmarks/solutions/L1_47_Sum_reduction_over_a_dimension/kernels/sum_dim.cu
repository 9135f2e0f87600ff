// Sum over one dimension, keepdim. The input is viewed as (outer, R, inner), reducing R.
// inner > 1: one thread per (outer, inner) column, consecutive threads read consecutive addresses (coalesced),
//            the R loop unrolled by 4 with independent accumulators.
// inner == 1 (reducing the last dimension): one warp per row with shuffles.
#include "cuda_agent.h"

__global__ void sum_columns(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t R, int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = idx / inner, i = idx % inner;
    const float* p = x + o * R * inner + i;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    int64_t r = 0;
    for (; r + 4 <= R; r += 4) {
      a0 += p[(r + 0) * inner];
      a1 += p[(r + 1) * inner];
      a2 += p[(r + 2) * inner];
      a3 += p[(r + 3) * inner];
    }
    for (; r < R; ++r) a0 += p[r * inner];
    y[idx] = (a0 + a1) + (a2 + a3);
  }
}

__global__ void sum_rows_warp(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t R) {
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* p = x + warp * R;
  float acc = 0.f;
  for (int64_t r = lane; r < R; r += 32) acc += p[r];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, off);
  if (lane == 0) y[warp] = acc;
}

void sum_dim_forward(ca::Tensor x, ca::Tensor out, int64_t dim) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "sum expects float32 tensors");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "sum expects contiguous tensors");
  if (dim < 0) dim += x.dim();
  CA_CHECK(dim >= 0 && dim < x.dim(), "reduction dimension out of range");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= x.size(d);
  for (int d = (int)dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t R = x.size((int)dim);
  CA_CHECK(out.numel() == outer * inner, "output size does not match the reduction");
  if (outer * inner == 0) return;
  const int threads = 256;
  if (inner == 1) {
    const int64_t blocks = (outer * 32 + threads - 1) / threads;
    sum_rows_warp<<<(unsigned)blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), outer, R);
  } else {
    int64_t blocks = (outer * inner + threads - 1) / threads;
    if (blocks > 65535LL * 16) blocks = 65535LL * 16;
    sum_columns<<<(unsigned)blocks, threads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), outer, R,
                                                                inner);
  }
}
CA_EXPORT(sum_dim_forward);
