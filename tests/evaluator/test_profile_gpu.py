"""Kernel auditing on a real GPU: side streams, ctypes-loaded libraries, decoys, torch.compile breakdowns and the
precision classes of real cuBLAS kernels."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest
import torch

from cuda_agent.evaluator.profile import audit_launches, classify_kernel, kernel_breakdown, launched_kernels

pytestmark = pytest.mark.gpu

_PROBE_CU = r"""
#include <cuda_runtime.h>
extern "C" __global__ void ctypes_probe_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2.0f * x[i] + 1.0f;
}
extern "C" __global__ void decoy_kernel_never_launched(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.0f;
}
extern "C" int probe_launch(float* x, int n, void* stream) {
  ctypes_probe_kernel<<<(n + 127) / 128, 128, 0, (cudaStream_t)stream>>>(x, n);
  return (int)cudaGetLastError();
}
"""


@pytest.fixture(scope="module")
def probe_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    nvcc = shutil.which("nvcc") or (shutil.which("/usr/local/cuda/bin/nvcc"))
    if nvcc is None:
        pytest.skip("nvcc not found")
    major, minor = torch.cuda.get_device_capability()
    tmp = tmp_path_factory.mktemp("probe")
    src, lib = tmp / "probe.cu", tmp / "libprobe.so"
    src.write_text(_PROBE_CU)
    subprocess.run(
        [nvcc, "-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{major}{minor}", "-o", str(lib), str(src)],
        check=True, capture_output=True, timeout=300,
    )
    handle = ctypes.CDLL(str(lib))
    handle.probe_launch.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    handle.probe_launch.restype = ctypes.c_int
    return handle


def test_kernel_from_a_ctypes_library_is_seen_and_decoy_is_not(probe_lib: ctypes.CDLL) -> None:
    x = torch.ones(1000, device="cuda")

    def call(t: torch.Tensor) -> torch.Tensor:
        rc = probe_lib.probe_launch(t.data_ptr(), t.numel(), torch.cuda.current_stream().cuda_stream)
        assert rc == 0
        return t

    kernels = launched_kernels(call, [x])
    names = [k.name for k in kernels]
    probe = [k for k in kernels if "ctypes_probe_kernel" in k.name]
    assert len(probe) == 1, names
    assert probe[0].grid == (8, 1, 1) and probe[0].block == (128, 1, 1)
    assert probe[0].on_caller_stream and probe[0].launched_by == ""
    assert classify_kernel(probe[0].name) == "other"
    assert not any("decoy_kernel_never_launched" in n for n in names)
    assert torch.all(x == 3.0)


def test_kernel_on_a_side_stream_has_its_own_stream_id() -> None:
    x = torch.randn(1 << 16, device="cuda")
    side = torch.cuda.Stream()

    def sneaky(t: torch.Tensor) -> torch.Tensor:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.relu(t)
        return t * 2

    audit = audit_launches(sneaky, [x])
    relu = [k for k in audit.kernels if k.launched_by in ("aten::relu", "aten::clamp_min")]
    assert relu, [(k.name, k.launched_by) for k in audit.kernels]
    assert all(not k.on_caller_stream and k.stream != audit.caller_stream for k in relu)
    mul = [k for k in audit.kernels if k.launched_by == "aten::mul"]
    assert mul and all(k.on_caller_stream for k in mul)


def test_breakdown_of_compiled_baseline_shows_triton_kernels() -> None:
    x = torch.randn(4096, 4096, device="cuda")
    compiled = torch.compile(lambda t: torch.relu(t) * 2 + 1)
    rows = kernel_breakdown(compiled, [x], reps=3)
    assert rows and any(r.name.startswith("triton_") for r in rows), rows
    assert all(r.total_us > 0 and r.calls >= 1 for r in rows)
    eager = kernel_breakdown(lambda t: torch.relu(t) * 2 + 1, [x], reps=3)
    assert sum(r.calls for r in eager) >= 3  # relu, mul, add: unfused
    assert {classify_kernel(r.name) for r in eager} == {"pytorch"}


def test_precision_classes_of_real_cublas_kernels() -> None:
    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        fp32 = launched_kernels(torch.mm, [a, b])
        torch.backends.cuda.matmul.allow_tf32 = True
        tf32 = launched_kernels(torch.mm, [a, b])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    half = launched_kernels(torch.mm, [a.half(), b.half()])
    assert fp32 and all(classify_kernel(k.name) != "reduced_precision" for k in fp32), [k.name for k in fp32]
    assert any(classify_kernel(k.name) == "reduced_precision" for k in tf32), [k.name for k in tf32]
    assert any(classify_kernel(k.name) == "reduced_precision" for k in half), [k.name for k in half]


def test_kernel_durations_are_repeatable() -> None:
    a = torch.randn(4096, 4096, device="cuda")
    totals = [sum(r.total_us for r in kernel_breakdown(torch.sigmoid, [a], reps=5)) for _ in range(5)]
    mean = sum(totals) / len(totals)
    assert max(abs(t - mean) for t in totals) / mean < 0.1, totals
