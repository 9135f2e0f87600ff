"""Splitting a CUDA source into a torch-free device file and a host file: what moves where, and what is refused."""
from __future__ import annotations

import pytest

from cuda_agent.compiler.inline.binding import BindingError, main_cpp, plan_binding
from cuda_agent.compiler.inline.cxxlex import LexError, split_items, text_of, tokenize
from cuda_agent.compiler.inline.spec import InlineSpec
from cuda_agent.compiler.inline.split import SplitError, plan_split

SOURCE = r'''
#include <torch/extension.h>
#include <cuda_runtime.h>
#define BLOCK 256
constexpr int kUnroll = 4;
struct Params { int n; float scale; };
const char* kMessage = "not a kernel <<< here";
__device__ __forceinline__ float sq(float x) { return x * x; }

template <typename scalar_t>
__global__ void __launch_bounds__(256) square_kernel(const scalar_t* __restrict__ x, scalar_t* y, Params p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) y[i] = (scalar_t)sq((float)x[i]) * p.scale;  // braces in a comment: {{
}
static __global__ void add_kernel(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
namespace {
__global__ void zero_kernel(float* p, int n) { if ((int)threadIdx.x < n) p[threadIdx.x] = 0; }
}
torch::Tensor square(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    Params p{(int)x.numel(), (float)s};
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "square", ([&] {
        square_kernel<scalar_t><<<(p.n + BLOCK - 1) / BLOCK, BLOCK, 0, 0>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), p);
    }));
    return y;
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int n = a.numel();
    cudaFuncSetAttribute(add_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 50);
    add_kernel<<<dim3((n + 255) / 256), 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    zero_kernel<<<1, 32, 0, nullptr>>>(out.data_ptr<float>(), 0);
    return out;
}
'''


def test_kernels_go_to_the_device_file_and_launches_become_shim_calls():
    plan = plan_split(SOURCE)
    host, device = plan.host_source("types"), plan.device_source
    assert plan.host_variants == ("types", "all")
    assert plan.templated == ("square_kernel",) and plan.krefs == ("add_kernel",)
    assert "#include <torch/extension.h>" not in host and "torch/" not in device
    assert "#include <torch/all.h>" in plan.host_source("all") and "torch/all.h" not in host
    for kernel in ("square_kernel", "add_kernel", "zero_kernel"):
        assert "__global__ void" in device and f"void cak_launch_{kernel}(" in host
        assert f"{kernel}<<<" not in host
    assert "::cak_launch_square_kernel<scalar_t>((p.n + BLOCK - 1) / BLOCK, BLOCK, 0, 0, x.data_ptr<scalar_t>()" in host
    assert "::cak_launch_add_kernel(dim3((n + 255) / 256), 256, 0, 0, a.data_ptr<float>()" in host
    assert "::cak_launch_zero_kernel(1, 32, 0, nullptr, out.data_ptr<float>(), 0)" in host
    assert "cudaFuncSetAttribute((::cak_kref_add_kernel())" in host
    # the anonymous namespace is closed around the shim's declaration so that it links to the device file's
    assert "} void cak_launch_zero_kernel(" in host and "namespace {" in host
    # shared pieces are in both files; device-only pieces are not in the host file
    for shared in ("#define BLOCK 256", "constexpr int kUnroll = 4;", "struct Params { int n; float scale; };"):
        assert shared in host and shared in device
    assert "sq(float x)" in device and "sq(float x)" not in host
    assert 'kMessage = "not a kernel <<< here"' in host and "kMessage" not in device
    assert "square_kernel<scalar_t><<<cak_grid_, cak_block_, cak_shmem_, cak_stream_>>>(x, y, p);" in device
    assert host.count("\n") == SOURCE.count("\n"), "host lines keep the user's line numbers"


def test_template_shims_are_instantiated_from_the_host_objects_needs():
    plan = plan_split(SOURCE)
    symbols = ["                 U void cak_launch_square_kernel<float>(dim3, dim3, unsigned long, CUstream_st*, "
               "float const*, float*, Params)",
               "                 U void cak_launch_square_kernel<c10::Half>(dim3, dim3, unsigned long, CUstream_st*, "
               "c10::Half const*, c10::Half*, Params)",
               "                 U cak_launch_add_kernel(dim3, dim3, unsigned long, CUstream_st*, float const*, "
               "float const*, float*, int)"]
    device = plan.device_with_instances(symbols)
    assert device.startswith("#include <c10/util/Half.h>\n")
    assert "(void*)&cak_launch_square_kernel<float>;" in device
    assert "(void*)&cak_launch_square_kernel<c10::Half>;" in device
    assert "cak_launch_add_kernel<" not in device
    with pytest.raises(SplitError, match="torch type"):
        plan.device_with_instances(["U void cak_launch_square_kernel<at::Tensor>(dim3)"])


@pytest.mark.parametrize("source, reason", [
    ("namespace ns { __global__ void k(float* x) {} }\nvoid f(float* x) { ns::k<<<1, 1>>>(x); }", "named namespace"),
    ("__constant__ float w[4];\n__global__ void k(float* x) { x[0] = w[0]; }\n"
     "void f(float* x, float* h) { cudaMemcpyToSymbol(w, h, 16); k<<<1, 1>>>(x); }", "device symbol"),
    ("__global__ void k(at::Half* x) {}\nvoid f() {}", "torch"),
    ("#define LAUNCH(x) k<<<1, 1>>>(x)\n__global__ void k(float* x) {}", "preprocessor"),
    ("#ifdef __CUDACC__\n#define MODE 1\n#endif\n__global__ void k(float* x) {}", "__CUDACC__"),
    ("#ifndef C10_WARP_SIZE\n#define W 32\n#endif\n__global__ void k(float* x) {}", "torch headers define"),
    ("template <typename T> struct Acc { using type = T; };\ntemplate <> struct Acc<c10::Half> { using type = float; };\n"
     "template <typename T> __global__ void k(T* x) { typename Acc<T>::type v = x[0]; x[0] = v; }", "host-only"),
    ("__global__ void k(float*) {}", "no name"),
    ("__global__ void k(float* x) {}\n__global__ void k(double* x) {}", "overloaded"),
    ("void f(float* x) { g<<<1, 1>>>(x); }\n__global__ void k(float* x) {}", "not a kernel defined"),
    ("void f() {}", "no __global__"),
    ("__global__ void k(float* x) { x[0] = WARP; }", "macros"),
])
def test_sources_that_cannot_be_split_with_certainty_are_refused(source, reason):
    with pytest.raises(SplitError, match=reason):
        plan_split(source, frozenset({"C10_WARP_SIZE", "WARP"}))


@pytest.mark.parametrize("head, body, variants", [
    ("#include <torch/extension.h>", 'pybind11::print("x");', ("ext",)),
    ("#include <torch/extension.h>", "auto m = torch::nn::Linear(2, 2);", ("all",)),
    ("#define NDEBUG 1\n#include <torch/extension.h>", "", ("keep",)),
    ("#include <ATen/ATen.h>", "", ("types",)),
    ("#include <torch/extension.h>", "", ("types", "all")),
])
def test_the_host_file_keeps_as_much_of_torchs_headers_as_the_code_needs(head, body, variants):
    plan = plan_split(f"{head}\n__global__ void k(float* x) {{}}\n"
                      f"void f(torch::Tensor t) {{ {body} k<<<1, 1>>>(t.data_ptr<float>()); }}")
    assert plan.host_variants == variants
    first = plan.host_source(variants[0])
    if variants[0] in ("ext", "keep"):
        assert "#include <torch/extension.h>" in first
    else:
        assert "torch/extension.h" not in first


def test_the_lexer_follows_literals_comments_and_blocks():
    src = 'const char* s = R"x(}{ "quoted" )x";\n// }\n/* { */ int a = 1;\nextern "C" {\nint b;\n}\n' \
          'struct S { int x; } s = {1};\nauto f = [](int v) { return v; };\n#define M(a) \\\n  { a }\nint z;\n'
    toks = tokenize(src)
    assert "".join(t.text for t in toks) == src
    items = split_items(toks)
    kinds = [i.kind for i in items if i.kind != "trivia"]
    assert kinds == ["decl", "decl", "block", "decl", "decl", "pp", "decl"]
    assert text_of(toks, items[2].lo, items[2].hi).strip().startswith('extern "C"')
    with pytest.raises(LexError):
        split_items(tokenize("void f() { if (x) { }"))
    with pytest.raises(LexError):
        tokenize('const char* s = "unterminated\n";')


def test_prototypes_bind_through_per_signature_objects():
    spec = InlineSpec.from_call({"name": "e", "functions": {"f": "doc f", "g": "g"}, "cpp_sources": [
        "#include <torch/extension.h>\nusing namespace torch;\n",
        "Tensor f(const torch::Tensor& x, double s, int64_t n);\nstd::vector<at::Tensor> g(torch::Tensor, bool);"]})
    plan = plan_binding(spec)
    assert [(n, d, s.pointer_type) for n, d, s in plan.functions] == [
        ("f", "doc f", "at::Tensor (*)(const at::Tensor &, double, int64_t)"),
        ("g", "g", "std::vector<at::Tensor> (*)(at::Tensor, bool)")]
    module = plan.module_source()
    assert "at::Tensor f(const at::Tensor &, double, int64_t);" in module
    key = plan.sig_key(plan.functions[0][2])
    assert f'cak_bind_{key}(m, "f", reinterpret_cast<void*>(&f), "doc f") != 0' in module
    assert "#include <Python.h>" in module and "pybind11" not in module and "torch/" not in module
    assert "PyModuleDef_Init(&cak_def)" in module and "CAK_CAT(PyInit_, TORCH_EXTENSION_NAME)" in module
    sig = plan.sig_source(key)
    assert "m.def(name, torch::wrap_pybind_function(*fn), doc);" in sig and f'extern "C" int cak_bind_{key}(' in sig
    unwrapped = plan_binding(InlineSpec.from_dict({**spec.to_dict(), "with_pytorch_error_handling": False}))
    assert "m.def(name, *fn, doc);" in unwrapped.sig_source(unwrapped.sig_key(unwrapped.functions[0][2]))
    assert plan.sig_key(plan.functions[0][2]) != unwrapped.sig_key(unwrapped.functions[0][2])


@pytest.mark.parametrize("cpp, functions", [
    ("torch::Tensor f(torch::Tensor x) { return x; }", ["f"]),
    ("MyType f(torch::Tensor x);", ["f"]),
    ("torch::Tensor f(float* x);", ["f"]),
    ("torch::Tensor f(torch::Tensor x, double s = 1.0);", ["f"]),
    ("#include <my_header.h>\ntorch::Tensor f(torch::Tensor x);", ["f"]),
    ("torch::Tensor f(torch::Tensor x);", ["g"]),
    ("torch::Tensor f(torch::Tensor x);", {"f": 'quote " in doc'}),
    ("torch::Tensor f(torch::Tensor x);", None),
])
def test_prototypes_that_are_not_certain_use_torchs_main_cpp(cpp, functions):
    spec = InlineSpec.from_call({"name": "e", "cpp_sources": cpp, "functions": functions})
    with pytest.raises(BindingError):
        plan_binding(spec)


def test_main_cpp_is_torchs_text():
    spec = InlineSpec.from_call({"name": "e", "cpp_sources": ["int f();", "int g();"], "functions": {"f": "F", "g": "g"}})
    assert main_cpp(spec) == ('#include <torch/extension.h>\nint f();\nint g();\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n'
                              'm.def("f", torch::wrap_pybind_function(f), "F");\n'
                              'm.def("g", torch::wrap_pybind_function(g), "g");\n}')
