"""A single-file solution whose functions also run on CPU tensors (host loops next to CUDA kernels), so that a CPU
machine can call both torch's build and ours. Its CUDA file splits: kernels, a template kernel, a __device__
helper, a struct, a constexpr shared by both sides."""
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

constexpr int kThreads = 128;
struct Affine { float a; float b; };

__device__ __forceinline__ float apply(Affine p, float v) { return p.a * v + p.b; }

__global__ void affine_kernel(const float* __restrict__ x, float* __restrict__ y, Affine p, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = apply(p, x[i]);
}

template <typename scalar_t>
__global__ void square_kernel(const scalar_t* x, scalar_t* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}

torch::Tensor scale_shift(torch::Tensor x, double a, double b) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "scale_shift: float32 expected, got ", x.scalar_type());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    Affine p{(float)a, (float)b};
    int64_t n = xc.numel();
    if (xc.is_cuda()) {
        affine_kernel<<<(n + kThreads - 1) / kThreads, kThreads>>>(xc.data_ptr<float>(), y.data_ptr<float>(), p, n);
    } else {
        const float* in = xc.data_ptr<float>();
        float* out = y.data_ptr<float>();
        for (int64_t i = 0; i < n; ++i) out[i] = p.a * in[i] + p.b;
    }
    return y;
}

torch::Tensor square(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "square", ([&] {
        if (xc.is_cuda()) {
            square_kernel<scalar_t><<<(n + kThreads - 1) / kThreads, kThreads>>>(
                xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
        } else {
            const scalar_t* in = xc.data_ptr<scalar_t>();
            scalar_t* out = y.data_ptr<scalar_t>();
            for (int64_t i = 0; i < n; ++i) out[i] = in[i] * in[i];
        }
    }));
    return y;
}

int64_t count_above(torch::Tensor x, double threshold) {
    auto c = x.contiguous().to(torch::kCPU);
    int64_t count = 0;
    for (int64_t i = 0; i < c.numel(); ++i) count += c.data_ptr<float>()[i] > threshold;
    return count;
}
"""

cpp_src = """
torch::Tensor scale_shift(torch::Tensor x, double a, double b);
torch::Tensor square(torch::Tensor x);
int64_t count_above(torch::Tensor x, double threshold);
"""

ext = load_inline(name="cak_case_cpu_branch", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions={"scale_shift": "a*x+b", "square": "x*x", "count_above": "how many above"},
                  extra_cflags=["-O2"], extra_cuda_cflags=["-O2"], verbose=False)


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the message is what is compared
        return [type(exc).__name__, str(exc).splitlines()[0]]
    return None


def probe(device="cpu"):
    x = torch.linspace(-2, 2, 11, device=device)
    return {
        "scale_shift": ext.scale_shift(x, 1.5, -0.25).tolist(),
        "square_f32": ext.square(x).tolist(),
        "square_f64": ext.square(x.double()).tolist(),
        "count_above": ext.count_above(x, 0.3),
        "wrong_dtype": _error(lambda: ext.scale_shift(x.double(), 1.0, 0.0)),
        "wrong_arity": _error(lambda: ext.square(x, 2)),
    }
