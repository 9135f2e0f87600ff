"""An extension that writes its own PYBIND11_MODULE (functions=None), with keyword arguments and defaults."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>

__global__ void clamp_scale_kernel(const float* x, float* y, float lo, float hi, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fminf(fmaxf(x[i], lo), hi) * scale;
}

torch::Tensor clamp_scale(torch::Tensor x, double lo, double hi, double scale) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int n = xc.numel();
    clamp_scale_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), lo, hi, scale, n);
    return y;
}
"""

cpp_src = """
#include <torch/extension.h>
torch::Tensor clamp_scale(torch::Tensor x, double lo, double hi, double scale);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("clamp_scale", &clamp_scale, "clamp then scale",
          pybind11::arg("x"), pybind11::arg("lo") = -1.0, pybind11::arg("hi") = 1.0, pybind11::arg("scale") = 1.0);
}
"""

ext = load_inline(name="clamp_scale_module", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=None,
                  extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.clamp_scale(x, hi=0.5, scale=2.0)


def get_inputs():
    return [torch.randn(16, 16384).cuda()]


def get_init_inputs():
    return []
