"""A solution whose C++ source has a function body (so the binding is torch's own main.cpp) and whose CUDA file
uses __constant__ memory from host code (cudaMemcpyToSymbol), which the split path refuses: it builds whole."""
import torch
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__constant__ float c_coeffs[4];

__global__ void poly_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = c_coeffs[0] + v * (c_coeffs[1] + v * (c_coeffs[2] + v * c_coeffs[3]));
    }
}

torch::Tensor poly_cuda(torch::Tensor x, torch::Tensor coeffs) {
    TORCH_CHECK(coeffs.numel() == 4, "poly_cuda: 4 coefficients expected");
    auto c = coeffs.contiguous().to(torch::kCPU);
    cudaMemcpyToSymbol(c_coeffs, c.data_ptr<float>(), 4 * sizeof(float));
    auto y = torch::empty_like(x);
    int n = x.numel();
    poly_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_src = """
torch::Tensor poly_cuda(torch::Tensor x, torch::Tensor coeffs);

torch::Tensor poly(torch::Tensor x, torch::Tensor coeffs) {
    if (x.is_cuda()) return poly_cuda(x.contiguous(), coeffs);
    auto c = coeffs.contiguous();
    auto y = torch::zeros_like(x);
    for (int k = 3; k >= 0; --k) y = y * x + c[k].item<float>();
    return y;
}

std::vector<int64_t> shape_of(torch::Tensor x) { return x.sizes().vec(); }
"""

ext = load_inline(name="cak_case_cpp_body", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["poly", "shape_of"], with_pytorch_error_handling=False, verbose=False)


def probe(device="cpu"):
    x = torch.linspace(-1, 1, 9, device=device)
    coeffs = torch.tensor([0.5, -1.0, 0.25, 2.0], device=device)
    return {
        "poly": ext.poly(x, coeffs).tolist(),
        "shape_of": ext.shape_of(torch.zeros(2, 3, 4)),
    }
