"""The worked example in the single-turn prompt (`cuda_agent.rl.data.EXAMPLE_SOLUTION`) is a solution the real
evaluator builds (nvcc, here) and accepts in strict mode (on a GPU): a prompt that teaches a format the judge refuses
would train the policy toward -1."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.rl.data import EXAMPLE_SOLUTION, EXAMPLE_TASK, single_turn_messages
from cuda_agent.tasks.task import Task

HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()
EXAMPLE = Task(id="example/axpy", code=EXAMPLE_TASK + "\n", name="axpy")


def test_prompt_shows_the_example_then_the_task() -> None:
    task = Task(id="L1/19_ReLU-small", code="class Model:\n    pass\n")
    user = single_turn_messages(task)[1]["content"]
    assert user.index(EXAMPLE_SOLUTION) < user.index("task L1/19_ReLU-small") < user.index("class Model:\n    pass")
    assert "class ModelNew" in EXAMPLE_SOLUTION and "cpp_sources=" in EXAMPLE_SOLUTION


@pytest.mark.slow
@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
def test_example_solution_builds_in_strict_mode(tmp_path: Path) -> None:
    from cuda_agent.evaluator import EvalConfig, prebuild

    solution = tmp_path / "solution.py"
    solution.write_text(EXAMPLE_SOLUTION + "\n")
    assert prebuild(EXAMPLE, solution, EvalConfig(mode="strict", device="cuda"))
    broken = tmp_path / "broken.py"
    broken.write_text(EXAMPLE_SOLUTION.replace("return out;", "return out") + "\n")
    assert not prebuild(EXAMPLE, broken, EvalConfig(mode="strict", device="cuda"))


@pytest.mark.gpu
def test_example_solution_is_accepted_in_strict_mode(tmp_path: Path) -> None:
    import torch

    from cuda_agent.evaluator import EvalConfig, evaluate

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    solution = tmp_path / "solution.py"
    solution.write_text(EXAMPLE_SOLUTION + "\n")
    result = evaluate(EXAMPLE, solution, EvalConfig(mode="strict", timeout_s=240, profile=False))
    assert result.correct and result.reward >= 1, (result.stage, result.reason)
