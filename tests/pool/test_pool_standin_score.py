"""The stand-in's verdict: the paper's -1/1/2/3 from visible features of the solution, in both solution formats."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.result import EvalResult
from cuda_agent.evaluator.reward_schedule import (REWARD_BEATS_BOTH, REWARD_BEATS_EAGER, REWARD_CORRECT,
                                                  REWARD_INCORRECT)
from cuda_agent.pool import EvalJob, SolutionSnapshot, StandInEvaluator
from cuda_agent.pool.job import SINGLE_FILE_NAME
from cuda_agent.tasks import Task

MODEL_NEW = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
KERNEL = '__global__ void relu(const float* x, float* y, int n) { y[0] = x[0]; }\nCA_EXPORT(relu);\n'
TUNED = '__global__ void relu(const float4* x, float4* y, int n) { __shared__ float t[256]; }\nCA_EXPORT(relu);\n'
# (model_new.py, kernels/relu.cu or None, reward, stage)
SOLUTIONS = (
    ("import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n", KERNEL, REWARD_INCORRECT, "incorrect"),
    (MODEL_NEW, None, REWARD_CORRECT, "correct"),
    (MODEL_NEW, KERNEL, REWARD_BEATS_EAGER, "timed"),
    (MODEL_NEW, TUNED, REWARD_BEATS_BOTH, "timed"),
)


def _snapshot(model_new: str, kernel: str | None, kind: str) -> SolutionSnapshot:
    if kind == "file":  # one file holding ModelNew and its CUDA source (a string for load_inline)
        source = model_new if kernel is None else f'{model_new}\nCUDA_SRC = r"""\n{kernel}"""\n'
        return SolutionSnapshot.from_files({SINGLE_FILE_NAME: source}, "file")
    return SolutionSnapshot.from_files({"model_new.py": model_new, **({"kernels/relu.cu": kernel} if kernel else {})})


def _evaluate(task: Task, snapshot: SolutionSnapshot, kind: str = "full") -> EvalResult:
    job = EvalJob(task=task, solution=snapshot, kind=kind)
    return EvalResult.from_dict(StandInEvaluator(seconds=0).evaluate(job, Path(".")))


@pytest.mark.parametrize("kind", ["workspace", "file"])
@pytest.mark.parametrize("model_new, kernel, reward, stage", SOLUTIONS)
def test_the_stand_in_scores_visible_features(task, kind, model_new, kernel, reward, stage):
    result = _evaluate(task, _snapshot(model_new, kernel, kind))
    assert (result.reward, result.stage, result.correct) == (reward, stage, reward != REWARD_INCORRECT)
    assert "stand-in" in result.reason and any("stand-in" in note for note in result.notes)
    assert result.reward == _evaluate(task, _snapshot(model_new, kernel, kind)).reward  # deterministic
    if reward == REWARD_INCORRECT:
        assert "no ModelNew" in result.reason
    if stage == "timed":
        assert result.speedup_eager is not None and result.speedup_compile is not None


def test_a_verify_times_nothing_so_a_kernel_scores_one(task):
    result = _evaluate(task, _snapshot(MODEL_NEW, TUNED, "workspace"), kind="verify")
    assert (result.stage, result.reward, result.speedup_compile) == ("correct", REWARD_CORRECT, None)
