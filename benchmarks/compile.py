"""Compile-time benchmark: cold, incremental and no-op builds of a one-kernel workspace, against the published
CUDA-Agent workspace's compile step measured in the same run.

    PYTHONPATH=src python3 benchmarks/compile.py [--reference DIR] [--runs 5] [--reference-runs 3]

--reference is a local copy of the published workspace's agent_workdir (not part of this repo); its documented
compile command, `bash utils/compile.sh`, is timed from the shell, as an agent would run it.
Writes benchmarks/results/compile.json.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks_io import write_result
from cuda_agent.compiler import build_workspace, detect_arch, nvcc_path
from cuda_agent.tasks import Task
from cuda_agent.workspace import create_workspace

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, a, b):
        return self.alpha * a + b

def get_inputs():
    return [torch.randn(1, 128), torch.randn(1, 128)]

def get_init_inputs():
    return [2.0]
'''

KERNEL = r'''
#include "cuda_agent.h"

template <int UNROLL>
__global__ void scaled_sum_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                  float alpha, int64_t n) {
  int64_t start = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) * UNROLL;
  #pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    int64_t i = start + k;
    if (i < n) out[i] = alpha * a[i] + b[i];
  }
}

void scaled_sum(ca::Tensor a, ca::Tensor b, ca::Tensor out, double alpha) {
  CA_CHECK(a.dtype == ca::DType::Float32 && a.is_contiguous() && b.is_contiguous(), "contiguous float32 expected");
  constexpr int kThreads = THREADS, kUnroll = 4;
  int64_t n = a.numel();
  int64_t blocks = (n + kThreads * kUnroll - 1) / (kThreads * kUnroll);
  scaled_sum_kernel<kUnroll><<<blocks, kThreads, 0, ca::stream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), (float)alpha, n);
}
CA_EXPORT(scaled_sum);
'''


def kernel_source(threads: int) -> str:
    return KERNEL.replace("THREADS", str(threads))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def check_on_gpu(library: Path) -> bool:
    import torch

    from cuda_agent.compiler.runtime import load_library

    if not torch.cuda.is_available():
        return False
    ops = load_library(library)
    a, b = torch.randn(100_003, device="cuda"), torch.randn(100_003, device="cuda")
    out = torch.full_like(a, float("nan"))
    ops.scaled_sum(a, b, out, 2.0)
    return bool(torch.allclose(out, 2.0 * a + b))


def measure_ours(runs: int, scratch: Path) -> dict[str, float]:
    arch = detect_arch()
    ws = create_workspace(Task(id="bench/scaled_sum", code=TASK), scratch / "ws",
                          solution={"kernels/scaled_sum.cu": kernel_source(256)})
    cold, incremental, noop = [], [], []
    library = None
    for run in range(runs):
        cache = scratch / f"cache-cold-{run}"  # empty cache: everything compiled, the registry too
        result = build_workspace(ws.root, cache_dir=cache, arch=arch)
        assert result.ok, result.diagnostics
        cold.append(result.seconds)
        library = result.library
    warm_cache = scratch / "cache-cold-0"
    for run in range(runs):
        (ws.root / "kernels/scaled_sum.cu").write_text(kernel_source(64 + 16 * run))
        result = build_workspace(ws.root, cache_dir=warm_cache, arch=arch)
        assert result.ok and result.compiled == ("kernels/scaled_sum.cu",), result
        incremental.append(result.seconds)
    for _ in range(runs):
        result = build_workspace(ws.root, cache_dir=warm_cache, arch=arch)
        assert result.ok and result.compiled == ()
        noop.append(result.seconds)
    nvcc_alone = []
    for run in range(runs):
        out = scratch / f"alone-{run}.o"
        src = scratch / f"alone-{run}.cu"
        src.write_text(kernel_source(64 + run))
        include = Path(__import__("cuda_agent.compiler.builder", fromlist=["x"]).INFRA_INCLUDE)
        nvcc_alone.append(timed(lambda: subprocess.run(
            [nvcc_path(), "-c", str(src), "-o", str(out), "-O3", "-std=c++17", "-Xcompiler=-fPIC",
             f"-arch=sm_{arch}", f"-I{include}"], check=True, capture_output=True)))
    return {
        "cold_s": statistics.median(cold),
        "incremental_s": statistics.median(incremental),
        "noop_s": statistics.median(noop),
        "nvcc_alone_s": statistics.median(nvcc_alone),
        "runs": runs,
        "gpu_check_passed": int(check_on_gpu(library)) if library else 0,
    }


def measure_reference(reference: Path, runs: int, scratch: Path) -> dict[str, float]:
    times = []
    for run in range(runs):
        copy = scratch / f"reference-{run}"
        shutil.copytree(reference, copy)
        proc = subprocess.run(["bash", "utils/compile.sh"], cwd=copy, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"reference compile failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        start = time.perf_counter()
        times.append(None)
        shutil.rmtree(copy / "build", ignore_errors=True)
        # time a second, from-scratch call in the same copy: that is what every agent call costs
        times[-1] = timed(lambda: subprocess.run(["bash", "utils/compile.sh"], cwd=copy, check=True,
                                                 capture_output=True))
        del start
    return {"reference_cold_s": statistics.median(times), "reference_runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, help="local copy of the published agent_workdir")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reference-runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ca-compile-bench-") as tmp:
        scratch = Path(tmp)
        metrics = measure_ours(args.runs, scratch)
        if args.reference:
            metrics.update(measure_reference(args.reference.resolve(), args.reference_runs, scratch))
    path = write_result("compile", metrics, command="PYTHONPATH=src python3 " + " ".join(sys.argv))
    for key, value in metrics.items():
        print(f"{key:>22}: {value:.3f}" if isinstance(value, float) else f"{key:>22}: {value}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
