"""BuildPool with the real compiler: bounded concurrency, one shared compile cache."""
from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.pool import BuildPool, LocalPool, StandInEvaluator
from cuda_agent.tasks import Task

KERNEL = """#include "cuda_agent.h"
__global__ void scale_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = SCALE * x[i];
}
void scale(ca::Tensor x, ca::Tensor out) {
  int64_t n = x.numel();
  scale_kernel<<<(n + 255) / 256, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
CA_EXPORT(scale);
"""

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")]


def _workspace(task: Task, root: Path, scale: str) -> Path:
    from cuda_agent.workspace import create_workspace

    ws = create_workspace(task, root)
    (ws.root / "kernels" / "scale.cu").write_text(KERNEL.replace("SCALE", scale))
    return ws.root


def test_bounded_builds_share_one_cache(task: Task, tmp_path: Path) -> None:
    from cuda_agent.compiler import build_workspace

    active, peak, lock = [0], [0], threading.Lock()

    def counted(root: Path, **kwargs: Any) -> Any:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return build_workspace(root, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    cache = tmp_path / "cache"
    builds = BuildPool(2, cache_dir=cache, arch="90", jobs=1, builder=counted)
    roots = [_workspace(task, tmp_path / f"ws{i}", f"{i + 2}.0f") for i in range(3)]
    results = [f.result(timeout=600) for f in [builds.submit(root) for root in roots]]
    assert all(r.ok for r in results), [r.diagnostics for r in results]
    assert peak[0] == 2, "at most two builds at once, and the pool used both"
    assert all(r.compiled == ("kernels/scale.cu",) for r in results)

    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(), builds=builds) as pool:
        twin = _workspace(task, tmp_path / "twin", "2.0f")
        again = pool.submit_build(twin).result(timeout=600)
    assert again.ok and again.compiled == (), "an identical kernel from another workspace reuses the shared cache"
    assert again.library is not None and again.library.exists()
