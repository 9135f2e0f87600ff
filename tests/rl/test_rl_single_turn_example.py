"""The worked example in the single-turn prompt (`cuda_agent.rl.data.EXAMPLE_SOLUTION`) is a solution the real
evaluator builds (nvcc, here) and accepts in strict mode (on a GPU): a prompt that teaches a format the judge refuses
would train the policy toward -1."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.rl.data import EXAMPLE_SOLUTION, EXAMPLE_TASK, TASK_NOT_EXAMPLE, single_turn_messages
from cuda_agent.tasks.task import Task

HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()
EXAMPLE = Task(id="example/axpy", code=EXAMPLE_TASK + "\n", name="axpy")


def test_prompt_shows_the_example_then_the_task() -> None:
    task = Task(id="L1/19_ReLU-small", code="class Model:\n    pass\n")
    user = single_turn_messages(task)[1]["content"]
    assert user.index(EXAMPLE_SOLUTION) < user.index("task L1/19_ReLU-small") < user.index("class Model:\n    pass")
    # last, what the 0.5B model got wrong most with the example alone: the task's own interface, not the example's
    assert user.endswith(TASK_NOT_EXAMPLE) and "alpha" in TASK_NOT_EXAMPLE
    assert "class ModelNew" in EXAMPLE_SOLUTION and "cpp_sources=" in EXAMPLE_SOLUTION


def test_the_prompt_gives_modelnew_the_tasks_own_interface() -> None:
    """A task with a `Model` gets a skeleton of `ModelNew` with its own constructor and forward arguments (defaults and
    annotations as the task writes them; the constructor's arguments kept as attributes), after its code; one whose
    code has no `Model.forward` gets the note in words."""
    import ast

    from cuda_agent.rl.data import model_interface

    code = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
            "    def __init__(self, dim: int, eps: float = 1e-5):\n        super().__init__()\n        self.d = dim\n\n"
            "    def forward(self, x: torch.Tensor, *, scale=2.0) -> torch.Tensor:\n        return x.sum(self.d)\n")
    skeleton = model_interface(code)
    tree = ast.parse(skeleton.replace("...  #", "pass  #"))
    cls = tree.body[0]
    init, forward = cls.body
    assert cls.name == "ModelNew" and ast.unparse(init.args) == "self, dim: int, eps: float=1e-05"
    assert ast.unparse(forward.args) == "self, x: torch.Tensor, *, scale=2.0" and ast.unparse(forward.returns) == \
        "torch.Tensor"
    assert "self.dim = dim" in skeleton and "self.eps = eps" in skeleton
    user = single_turn_messages(Task(id="user/sum", code=code))[1]["content"]
    assert user.index(code.rstrip()) < user.index(skeleton) and "alpha" not in skeleton
    assert model_interface("class Model:\n    pass\n") is None and model_interface("def (") is None


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
