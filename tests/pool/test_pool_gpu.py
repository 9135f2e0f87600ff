"""LocalPool with the real evaluator on a GPU: a correct kernel is timed; an out-of-bounds kernel is reported and
its worker replaced; the next job runs on a healthy worker."""
from __future__ import annotations

import pytest

from cuda_agent.pool import EvalJob, LocalPool, RealEvaluator, detect_gpus
from cuda_agent.tasks import Task
from helpers import RELU_KERNEL

pytestmark = pytest.mark.gpu

RELU_CU = RELU_KERNEL
OOB_CU = RELU_CU.replace("if (i < n) y[i]", "y[i + (1ll << 40)]")
MODEL_NEW = """import torch
import torch.nn as nn
from binding import ops

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        ops.relu(x, out)
        return out
"""
TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4096, 1024)]

def get_init_inputs():
    return []
"""


def test_real_evaluations_and_a_broken_kernel() -> None:
    from cuda_agent.evaluator import EvalConfig

    task = Task(id="gpu/relu", code=TASK, name="relu")
    good = {"model_new.py": MODEL_NEW, "kernels/relu.cu": RELU_CU}
    bad = {"model_new.py": MODEL_NEW, "kernels/relu.cu": OOB_CU}
    config = EvalConfig(timeout_s=240)
    with LocalPool(gpus=detect_gpus()[:1], evaluator=RealEvaluator()) as pool:
        first = pool.submit(EvalJob.create(task, good, config)).result(timeout=600)
        broken = pool.submit(EvalJob.create(task, bad, config)).result(timeout=600)
        after = pool.submit(EvalJob.create(task, good, config, kind="verify")).result(timeout=600)
        stats = pool.stats()
    assert first.stage == "timed" and first.correct, (first.stage, first.reason)
    assert first.speedup_eager is not None
    assert not broken.correct and broken.stage in ("runtime_error", "crashed"), (broken.stage, broken.reason)
    assert after.stage == "correct" and after.correct, (after.stage, after.reason)
    if "illegal memory access" in (broken.reason + broken.log).lower():
        assert stats.replaced_workers >= 1
