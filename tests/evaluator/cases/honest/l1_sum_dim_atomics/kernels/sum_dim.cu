// sum over one dimension, keepdim: x seen as (outer, R, inner), out as (outer, inner), zeroed by the caller.
// Block (32, 8): threadIdx.x walks 32 consecutive inner columns (coalesced), threadIdx.y 8 rows of a chunk of the
// reduced axis; the 8 partial sums meet in shared memory and one float atomicAdd per column adds the chunk's sum.
#include "cuda_agent.h"

#include <algorithm>

constexpr int kCols = 32;
constexpr int kRows = 8;
constexpr int64_t kChunk = 512;  // rows of the reduced axis per block

__global__ void sum_dim_split_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t R,
                                     int64_t inner, int64_t chunk) {
  __shared__ float part[kRows][kCols + 1];
  const int64_t o = blockIdx.y;
  const int64_t col = (int64_t)blockIdx.x * kCols + threadIdx.x;
  const int64_t r0 = (int64_t)blockIdx.z * chunk;
  const int64_t r1 = min(R, r0 + chunk);
  float acc = 0.f;
  if (col < inner) {
    const float* base = x + o * R * inner + col;
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRows) acc += base[r * inner];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < inner) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kRows; ++i) s += part[i][threadIdx.x];
    atomicAdd(out + o * inner + col, s);
  }
}

void sum_dim_keepdim(ca::Tensor x, ca::Tensor out, int64_t dim) {
  CA_CHECK(x.dtype == ca::DType::Float32 && out.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(x.is_contiguous() && out.is_contiguous(), "contiguous tensors expected");
  CA_CHECK(dim >= 0 && dim < x.dim() && out.dim() == x.dim(), "bad dimension");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= x.size(i);
  for (int i = (int)dim + 1; i < x.dim(); ++i) inner *= x.size(i);
  const int64_t R = x.size((int)dim);
  CA_CHECK(out.numel() == outer * inner, "output must have the input's shape with size 1 at dim");
  if (outer == 0 || inner == 0 || R == 0) return;  // the caller's zeros are the answer
  const int64_t splits = (R + kChunk - 1) / kChunk;
  CA_CHECK(outer <= 65535 && splits <= 65535, "shape too large for this grid layout");
  dim3 block(kCols, kRows);
  dim3 grid((unsigned)((inner + kCols - 1) / kCols), (unsigned)outer, (unsigned)splits);
  sum_dim_split_kernel<<<grid, block, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), R, inner,
                                                         kChunk);
}
CA_EXPORT(sum_dim_keepdim);
