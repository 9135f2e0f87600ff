"""Real nvcc builds of small workspaces: cold, incremental, no-op, errors, concurrency, and (on a GPU) calls."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cuda_agent.compiler import build_workspace
from cuda_agent.compiler.runtime import KernelCallError, load_library
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace

CODE = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a) + b
def get_inputs():
    return [torch.rand(1000), torch.rand(1000)]
def get_init_inputs():
    return []
"""

RELU = r'''
#include "cuda_agent.h"
#include "common.cuh"
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
void relu(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32, "relu expects float32");
  int64_t n = x.numel();
  relu_kernel<<<blocks_for(n), kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
CA_EXPORT(relu);
'''

ADD = r'''
#include "cuda_agent.h"
#include "common.cuh"
__global__ void axpy_kernel(const float* x, float* y, float a, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
void axpy(ca::Tensor x, ca::Tensor y, double a, int64_t n, bool check) {
  if (check) CA_CHECK(n == x.numel(), "n must equal x.numel()");
  axpy_kernel<<<blocks_for(n), kThreads, 0, ca::stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)a, n);
}
CA_EXPORT(axpy);
'''

COMMON = "#pragma once\nconstexpr int kThreads = 256;\ninline int64_t blocks_for(int64_t n) { return (n + kThreads - 1) / kThreads; }\n"


def make_workspace(root: Path, **extra: str):
    files = {"kernels/relu.cu": RELU, "kernels/axpy.cu": ADD, "kernels/common.cuh": COMMON}
    files.update(extra)
    return create_workspace(Task(id="user/t", code=CODE), root, solution=files)


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="session")
def built(tmp_path_factory, cache):
    ws = make_workspace(tmp_path_factory.mktemp("ws") / "w")
    return ws, build_workspace(ws.root, cache_dir=cache, arch="90")


def test_cold_build_exports_every_function_with_its_signature(built):
    ws, result = built
    assert result.ok, result.diagnostics
    assert sorted(result.compiled) == ["kernels/axpy.cu", "kernels/relu.cu"]
    lib = load_library(result.library)
    assert set(lib.names) == {"relu", "axpy"}
    assert lib.relu.signature == "tt" and lib.axpy.signature == "ttfib"
    with pytest.raises(AttributeError, match="exported: axpy, relu"):
        lib.missing  # noqa: B018


def test_build_result_round_trips_through_json(built):
    import json

    from cuda_agent.compiler import BuildResult

    result = built[1]
    assert BuildResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    remote = BuildResult.from_dict(result.to_dict(), local=False)
    assert remote.library is None and remote.compiled == result.compiled and remote.ok


def test_argument_errors_are_readable_without_a_gpu(built):
    lib = load_library(built[1].library)
    with pytest.raises(KernelCallError, match="takes 2 arguments"):
        lib.relu(1)
    with pytest.raises(KernelCallError, match="argument 0 must be a Tensor"):
        lib.relu(1, 2)


def test_noop_rebuilds_nothing(built, cache):
    ws, first = built
    again = build_workspace(ws.root, cache_dir=cache, arch="90")
    assert again.ok and again.compiled == () and again.library == first.library
    assert again.seconds < 0.5


def test_editing_one_file_recompiles_only_that_file(tmp_path, built, cache):
    ws = make_workspace(tmp_path / "w2")
    assert build_workspace(ws.root, cache_dir=cache, arch="90").compiled == ()  # same content: shared cache
    (ws.root / "kernels/relu.cu").write_text(RELU.replace("0.f ? x[i] : 0.f", "0.f ? x[i] : 0.0f"))
    result = build_workspace(ws.root, cache_dir=cache, arch="90")
    assert result.ok and result.compiled == ("kernels/relu.cu",)
    assert result.library != built[1].library


def test_header_edit_rebuilds_its_includers(tmp_path, cache):
    ws = make_workspace(tmp_path / "w3")
    build_workspace(ws.root, cache_dir=cache, arch="90")
    (ws.root / "kernels/common.cuh").write_text(COMMON.replace("256", "128"))
    assert sorted(build_workspace(ws.root, cache_dir=cache, arch="90").compiled) == ["kernels/axpy.cu", "kernels/relu.cu"]


def test_compiler_errors_come_back_first_error_first_with_file_and_line(tmp_path, cache):
    broken = RELU.replace("int64_t n = x.numel();", "int64_t n = x.numel();\n  no_such_function(n);")
    ws = make_workspace(tmp_path / "w4", **{"kernels/relu.cu": broken})
    result = build_workspace(ws.root, cache_dir=cache, arch="90")
    assert not result.ok and result.library is None
    first = result.diagnostics.splitlines()[0]
    assert first.startswith("kernels/relu.cu:11: error:"), result.diagnostics
    assert "no_such_function" in result.diagnostics
    assert len(result.diagnostics) < 3000


def test_no_sources_is_explained(tmp_path, cache):
    ws = create_workspace(Task(id="user/t", code=CODE), tmp_path / "empty")
    result = build_workspace(ws.root, cache_dir=cache, arch="90")
    assert not result.ok and "no kernel sources" in result.diagnostics


def test_duplicate_export_names_are_refused(tmp_path, cache):
    ws = make_workspace(tmp_path / "w5", **{"kernels/relu2.cu": RELU.replace("relu_kernel", "relu_kernel2")})
    result = build_workspace(ws.root, cache_dir=cache, arch="90")
    assert not result.ok and "multiple definition" in result.diagnostics and "relu" in result.diagnostics
    # file-local functions link, but two exports of one name would make `ops.relu` ambiguous
    static_relu = RELU.replace("void relu(", "static void relu(").replace("relu_kernel", "relu_kernel3")
    ws = make_workspace(tmp_path / "w6", **{"kernels/relu2.cu": static_relu,
                                          "kernels/relu.cu": RELU.replace("void relu(", "static void relu(")})
    result = build_workspace(ws.root, cache_dir=cache, arch="90")
    assert result.ok, result.diagnostics
    with pytest.raises(Exception, match="two kernel files export a function named 'relu'"):
        load_library(result.library)


def test_concurrent_builds_of_different_workspaces_do_not_interfere(tmp_path, cache):
    variants = {i: RELU.replace("0.f ? x[i] : 0.f", f"0.f ? x[i] : {i + 7}.0f") for i in range(2)}
    spaces = [make_workspace(tmp_path / f"c{i}", **{"kernels/relu.cu": variants[i]}) for i in range(2)]
    results = {}

    def run(i):
        results[i] = build_workspace(spaces[i].root, cache_dir=cache, arch="90", jobs=1)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.ok for r in results.values()), [r.diagnostics for r in results.values()]
    assert results[0].library != results[1].library
    assert all("kernels/relu.cu" in r.compiled for r in results.values())


@pytest.mark.gpu
def test_kernels_run_on_the_gpu(built):
    import torch

    lib = load_library(built[1].library)
    x = torch.randn(10_000, device="cuda")
    out = torch.full_like(x, float("nan"))
    lib.relu(x, out)
    torch.testing.assert_close(out, torch.relu(x))
    y = torch.randn(10_000, device="cuda")
    expected = y + 0.5 * x
    lib.axpy(x, y, 0.5, x.numel(), True)
    torch.testing.assert_close(y, expected)
    with pytest.raises(KernelCallError, match="n must equal x.numel"):
        lib.axpy(x, y, 0.5, 3, True)
    with pytest.raises(KernelCallError, match="pass CUDA tensors"):
        lib.relu(x.cpu(), out)


@pytest.mark.gpu
def test_binding_module_in_a_workspace(built):
    import importlib.util
    import sys

    import torch

    ws, _ = built
    (ws.root / "model_new.py").write_text(
        "import torch\nimport torch.nn as nn\nfrom binding import ops\n"
        "class ModelNew(nn.Module):\n    def forward(self, a, b):\n"
        "        out = torch.empty_like(a)\n        ops.relu(a, out)\n        ops.axpy(b, out, 1.0, b.numel(), False)\n"
        "        return out\n"
    )
    sys.path.insert(0, str(ws.root))
    try:
        spec = importlib.util.spec_from_file_location("model_new_under_test", ws.root / "model_new.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        torch.testing.assert_close(module.ModelNew()(a, b), torch.relu(a) + b)
    finally:
        sys.path.remove(str(ws.root))
        sys.modules.pop("binding", None)
