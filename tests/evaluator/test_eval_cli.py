"""`cuda-agent eval`: the table, the JSON file, the exit code, and task resolution."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cuda_agent.cli.eval import register, resolve_task
from cuda_agent.errors import TaskError
from cuda_agent.locations import kernelbench_root

from evalcases import CASES


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def _root() -> None:
        pass

    return app


@pytest.mark.slow
def test_eval_writes_json_and_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "r.json"
    bad = runner.invoke(_app(), ["eval", "--task", str(CASES / "tasks" / "tiny_mean.py"), "--mode", "relaxed",
                                 "--no-profile", "--json", str(out), "--solution",
                                 str(CASES / "adversarial" / "cpu" / "trivial_zeros.py")])
    assert bad.exit_code == 1, bad.output
    text = " ".join(bad.output.split())
    assert "trivial_output" in text and "reward" in text and "rule_violation" in text
    data = json.loads(out.read_text())
    assert data["stage"] == "rule_violation" and data["reward"] == -1 and data["correct"] is False
    assert data["rules_fired"][0]["rule"] == "trivial_output"
    assert data["input_sets_checked"] >= 1  # a rule ends the evaluation at the first call that fires it


def test_eval_reports_a_missing_solution(tmp_path: Path) -> None:
    result = CliRunner().invoke(_app(), ["eval", "--task", str(CASES / "tasks" / "tiny_mean.py"),
                                         "--solution", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such" in " ".join(result.output.split())


def test_eval_refuses_a_folder_that_is_not_a_workspace_before_evaluating(tmp_path: Path) -> None:
    folder = tmp_path / "loose"
    (folder / "kernels").mkdir(parents=True)
    (folder / "model_new.py").write_text("class ModelNew: pass\n")
    result = CliRunner().invoke(_app(), ["eval", "--task", str(CASES / "tasks" / "tiny_mean.py"),
                                         "--solution", str(folder)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "not a cuda-agent workspace" in text and "workspace new" in text


def test_resolve_task_by_kernelbench_id() -> None:
    with pytest.raises(TaskError):
        resolve_task("not/a/task")
    if kernelbench_root() is None:
        pytest.skip("KernelBench data absent")
    assert resolve_task("L1/19_ReLU").name == "19_ReLU"
    assert resolve_task("L1/19").name == "19_ReLU"
