"""Small helpers for tests and benchmarks: where the KernelBench data lies, whether a GPU is here."""
from __future__ import annotations

import os
from pathlib import Path


def kernelbench_root() -> Path | None:
    """The KernelBench task folder (levels 1-3): ``$CUDA_AGENT_KERNELBENCH``, else ``../shared/kernelbench`` beside
    the checkout or the current directory, else the copy `cuda-agent data fetch kernelbench` put in the cache; None
    where none exists."""
    from cuda_agent.tasks.hub import kernelbench_cache

    env = os.environ.get("CUDA_AGENT_KERNELBENCH")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [parent / "shared" / "kernelbench" for parent in here.parents]
    candidates.append(Path.cwd().parent / "shared" / "kernelbench")
    candidates.append(kernelbench_cache())
    for path in candidates:
        if (path / "level1").is_dir():
            return path
    return None


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# The smallest valid KernelBench-format task (ReLU over 16 floats), for tests of loading, workspaces and commands.
RELU_TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(16)]

def get_init_inputs():
    return []
"""

# A correct elementwise ReLU in the workspace ABI (float32, any size): the smallest real kernel file, shared by tests
# and demos that need one.
RELU_KERNEL = """#include "cuda_agent.h"
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
void relu(ca::Tensor x, ca::Tensor out) {
  int64_t n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
CA_EXPORT(relu);
"""
