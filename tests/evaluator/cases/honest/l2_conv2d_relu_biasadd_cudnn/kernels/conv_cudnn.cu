// Conv2d (stride 1, no padding, no dilation, groups 1) through cuDNN's legacy API, fp32 with FMA math only.
#include "cuda_agent.h"

#include <cudnn.h>

#include <string>

#define CUDNN_CHECK(expr)                                                                               \
  do {                                                                                                  \
    const cudnnStatus_t st_ = (expr);                                                                   \
    CA_CHECK(st_ == CUDNN_STATUS_SUCCESS, std::string(#expr) + " -> " + cudnnGetErrorString(st_));      \
  } while (0)

namespace {

struct ConvPlan {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  int64_t key[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t algo_bytes = 0;

  void init() {
    if (handle) return;
    CUDNN_CHECK(cudnnCreate(&handle));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc));
  }

  // (Re)describe the problem and pick an algorithm when the shapes or the workspace size change.
  void prepare(const ca::Tensor& x, const ca::Tensor& w, const ca::Tensor& y, size_t workspace_bytes) {
    const int64_t k[9] = {x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3),
                          (int64_t)workspace_bytes, y.size(2) * 100000 + y.size(3)};
    bool same = true;
    for (int i = 0; i < 9; ++i) same = same && key[i] == k[i];
    if (same) return;
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)x.size(0),
                                           (int)x.size(1), (int)x.size(2), (int)x.size(3)));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)w.size(0),
                                           (int)w.size(1), (int)w.size(2), (int)w.size(3)));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc, CUDNN_FMA_MATH));  // fp32 FMA kernels only: no TF32
    int n = 0, c = 0, h = 0, wd = 0;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc, x_desc, w_desc, &n, &c, &h, &wd));
    CA_CHECK(n == y.size(0) && c == y.size(1) && h == y.size(2) && wd == y.size(3), "output shape mismatch");
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, wd));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_desc, w_desc, conv_desc, y_desc,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;  // needs no workspace; the fallback
    algo_bytes = 0;
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
          perf[i].memory <= workspace_bytes) {
        algo = perf[i].algo;
        algo_bytes = perf[i].memory;
        break;
      }
    }
    size_t need = 0;
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc, w_desc, conv_desc, y_desc, algo, &need));
    if (need > workspace_bytes) {
      algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
      need = 0;
    }
    algo_bytes = need;
    for (int i = 0; i < 9; ++i) key[i] = k[i];
  }
};

ConvPlan& plan_for_device() {
  static thread_local ConvPlan plans[64];
  int device = 0;
  CA_CUDA_CHECK(cudaGetDevice(&device));
  CA_CHECK(device >= 0 && device < 64, "device index out of range");
  plans[device].init();
  return plans[device];
}

}  // namespace

void conv2d_cudnn(ca::Tensor x, ca::Tensor w, ca::Tensor y, ca::Tensor workspace) {
  CA_CHECK(x.dtype == ca::DType::Float32 && w.dtype == ca::DType::Float32 && y.dtype == ca::DType::Float32,
           "float32 expected");
  CA_CHECK(x.dim() == 4 && w.dim() == 4 && y.dim() == 4 && x.size(1) == w.size(1), "NCHW x, (K, C, R, S) weight");
  CA_CHECK(x.is_contiguous() && w.is_contiguous() && y.is_contiguous() && workspace.is_contiguous(), "contiguous");
  if (y.numel() == 0) return;
  ConvPlan& p = plan_for_device();
  const size_t ws_bytes = (size_t)workspace.numel() * (size_t)workspace.element_size;
  p.prepare(x, w, y, ws_bytes);
  CUDNN_CHECK(cudnnSetStream(p.handle, ca::stream()));
  const float alpha = 1.f, beta = 0.f;
  CUDNN_CHECK(cudnnConvolutionForward(p.handle, &alpha, p.x_desc, x.data, p.w_desc, w.data, p.conv_desc, p.algo,
                                      p.algo_bytes ? workspace.data : nullptr, p.algo_bytes, &beta, p.y_desc,
                                      y.data));
}
CA_EXPORT(conv2d_cudnn);

// y = relu(y + b1[c]) + b2[c] on NCHW; grid.y walks the N*C planes, grid.x the positions of a plane.
__global__ void bias_relu_bias_vec4(float4* __restrict__ y, const float* __restrict__ b1, const float* __restrict__ b2,
                                    int64_t C, int64_t hw4) {
  const int64_t plane = blockIdx.y;
  const int64_t c = plane % C;
  const float p = b1[c], q = b2[c];
  float4* yp = y + plane * hw4;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < hw4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = yp[i];
    v.x = fmaxf(v.x + p, 0.f) + q;
    v.y = fmaxf(v.y + p, 0.f) + q;
    v.z = fmaxf(v.z + p, 0.f) + q;
    v.w = fmaxf(v.w + p, 0.f) + q;
    yp[i] = v;
  }
}

__global__ void bias_relu_bias_scalar(float* __restrict__ y, const float* __restrict__ b1,
                                      const float* __restrict__ b2, int64_t C, int64_t hw) {
  const int64_t plane = blockIdx.y;
  const int64_t c = plane % C;
  const float p = b1[c], q = b2[c];
  float* yp = y + plane * hw;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < hw; i += (int64_t)gridDim.x * blockDim.x)
    yp[i] = fmaxf(yp[i] + p, 0.f) + q;
}

void bias_relu_bias_(ca::Tensor y, ca::Tensor conv_bias, ca::Tensor bias) {
  CA_CHECK(y.dtype == ca::DType::Float32 && conv_bias.dtype == ca::DType::Float32 &&
               bias.dtype == ca::DType::Float32, "float32 expected");
  CA_CHECK(y.dim() == 4 && y.is_contiguous() && conv_bias.numel() == y.size(1) && bias.numel() == y.size(1),
           "NCHW output and one bias value per channel");
  const int64_t planes = y.size(0) * y.size(1), hw = y.size(2) * y.size(3);
  if (planes == 0 || hw == 0) return;
  CA_CHECK(planes <= 65535, "too many planes for grid.y");
  if (hw % 4 == 0 && (reinterpret_cast<uintptr_t>(y.data) & 15) == 0) {
    const int64_t hw4 = hw / 4;
    const unsigned gx = (unsigned)((hw4 + 255) / 256 < 8 ? (hw4 + 255) / 256 : 8);
    bias_relu_bias_vec4<<<dim3(gx, (unsigned)planes), 256, 0, ca::stream()>>>(
        reinterpret_cast<float4*>(y.data), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), y.size(1), hw4);
  } else {
    const unsigned gx = (unsigned)((hw + 255) / 256 < 32 ? (hw + 255) / 256 : 32);
    bias_relu_bias_scalar<<<dim3(gx, (unsigned)planes), 256, 0, ca::stream()>>>(
        y.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), y.size(1), hw);
  }
}
CA_EXPORT(bias_relu_bias_);
