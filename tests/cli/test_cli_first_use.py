"""What a new user meets first: each mistake gets one line naming the flag or argument, the right exit status and
no traceback; nothing walks a folder the user did not name or starts a long run unasked; an episode that could not
reach its model exits non-zero; help shows no type for flags."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from cuda_agent.cli.main import app
from cuda_agent.errors import CudaAgentError
from helpers import RELU_TASK

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(args: list[str], **kwargs: Any) -> Any:
    return CliRunner().invoke(app, args, terminal_width=400, **kwargs)


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`cuda-agent ARGS` in a process of its own, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "cuda_agent.cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": SRC, **(env or {})})


def _one_line_error(output: str) -> str:
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, output
    return lines[0]


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "relu.py"
    path.write_text(RELU_TASK)
    return path


def test_an_empty_task_spec_walks_no_folder(tmp_path: Path, task_file: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # a task file here: an empty spec used to load the current folder
    result = _run(["tasks", "", "--no-validate"])
    assert result.exit_code == 2 and "SPEC" in result.output and "is empty" in result.output, result.output
    assert "1 tasks" not in result.output
    bench = _run(["bench", "offline", "--tasks", " ", "--solutions", str(tmp_path), "--standin"])
    assert bench.exit_code == 2 and "--tasks" in _one_line_error(bench.output)


@pytest.mark.parametrize("target", ["file/sub", "/proc/ws"])
def test_an_impossible_workspace_target_is_one_line(tmp_path: Path, task_file: Path, monkeypatch,
                                                     target: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("a file, not a folder\n")
    result = _run(["workspace", "new", str(task_file), target])
    assert result.exit_code == 2, result.output
    assert f"cannot create a workspace at {target}" in _one_line_error(result.output)


def test_build_outside_a_workspace_says_so_like_verify(tmp_path: Path) -> None:
    build = _run(["build", str(tmp_path)])
    verify = _run(["verify", str(tmp_path)])
    assert build.exit_code == verify.exit_code == 2
    assert "not a cuda-agent workspace" in _one_line_error(build.output)
    assert _one_line_error(build.output) == _one_line_error(verify.output)


def test_the_no_sandbox_message_names_a_flag_build_has(tmp_path: Path, task_file: Path) -> None:
    workspace = tmp_path / "ws"
    assert _run(["workspace", "new", str(task_file), str(workspace)]).exit_code == 0
    done = _cli(["build", str(workspace)], tmp_path, env={"CUDA_AGENT_BWRAP": "/bin/false"})  # no sandbox here
    assert done.returncode == 2 and "bubblewrap" in done.stdout, done.stdout + done.stderr
    flag = next(word for word in done.stdout.split() if word.startswith("--unsafe"))
    options = [name for param in typer.main.get_command(app).get_command(
        typer.Context(typer.main.get_command(app)), "build").params for name in param.opts]
    assert flag in options, (flag, options)
    unconfined = _cli(["build", str(workspace), flag], tmp_path, env={"CUDA_AGENT_BWRAP": "/bin/false"})
    assert "bubblewrap" not in unconfined.stdout and "Traceback" not in unconfined.stderr, unconfined.stdout


@pytest.mark.parametrize(("args", "flag"), [(["--mode", "bogus"], "--mode"), (["--device", "gpu9"], "--device"),
                                            (["--tolerance", "loose"], "--tolerance")])
def test_eval_settings_are_named_by_their_flag(task_file: Path, args: list[str], flag: str) -> None:
    result = _run(["eval", "--task", str(task_file), "--solution", str(task_file), *args])
    assert result.exit_code == 2 and f"Invalid value for {flag}" in result.output, result.output
    assert "EvalConfig" not in result.output


def test_serve_without_a_gpu_names_the_flags(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = _run(["serve", "--store", "none", "--token", "t", "--port", "0"])
    assert result.exit_code == 2
    line = _one_line_error(result.output)
    assert "--gpus" in line and "--standin" in line
    assert "gpus=" not in line and "StandInEvaluator" not in line


def test_train_names_the_config_of_the_stage_asked_for(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_AGENT_RL_CONFIGS", raising=False)
    monkeypatch.chdir(tmp_path)
    result = _run(["train", "warmup", "--dry-run"])
    assert result.exit_code == 1
    line = _one_line_error(result.output)
    assert "warmup.yaml" in line and "ppo.yaml" not in line and "--config" in line


def test_synth_without_arguments_starts_nothing(tmp_path: Path) -> None:
    done = _cli(["synth"], tmp_path, timeout=60)
    assert done.returncode == 2 and "--out" in done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []
    missing = _cli(["synth", "--n", "2"], tmp_path, timeout=60)
    assert missing.returncode == 2 and "Missing option '--out'" in missing.stderr
    assert list(tmp_path.iterdir()) == []


BOGUS_POLICY = r"""
import sys
from typer.testing import CliRunner
from cuda_agent.cli.main import app
result = CliRunner().invoke(app, ["optimize", "--policy", "bogus"], terminal_width=400)
print(result.exit_code, "--policy" in result.output, "cuda_agent.agent" in sys.modules, "torch" in sys.modules)
"""


def test_a_bogus_policy_is_refused_before_anything_heavy_is_imported(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", BOGUS_POLICY], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": SRC})
    assert done.stdout.split() == ["2", "True", "False", "False"], done.stdout + done.stderr


@pytest.mark.parametrize(("flag", "value"), [("--max-turns", "-1"), ("--max-tokens", "0"), ("--context-tokens", "0"),
                                           ("--max-completion-tokens", "0"), ("--max-wall", "nan"),
                                           ("--temperature", "inf"), ("--request-timeout", "-1")])
def test_optimize_budgets_out_of_range_are_refused(tmp_path: Path, flag: str, value: str) -> None:
    """A budget of -1 turns ran one turn, a context of 0 tokens ran 200, a NaN wall clock never ended."""
    result = _run(["optimize", "--policy", "scripted", "--verify", "skip", "--out", str(tmp_path / "run"), flag,
                   value])
    assert result.exit_code == 2 and flag in result.output, result.output
    assert not (tmp_path / "run").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_model_endpoint_fails_fast_and_non_zero(tmp_path: Path, task_file: Path,
                                                               monkeypatch) -> None:
    from cuda_agent.compiler import nvcc_path

    try:
        nvcc_path()
    except CudaAgentError:
        pytest.skip("optimize needs nvcc before it asks the model")
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    result = _run(["optimize", str(task_file), "--base-url", f"http://127.0.0.1:{_free_port()}/v1", "--model", "m",
                   "--api-key", "k", "--verify", "skip", "--sandbox", "local", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1, result.output
    line = _one_line_error(result.output)
    assert "policy_error" in line and "connection refused" in line and "--base-url" in line
    assert time.monotonic() - start < 40, "a refused connection is not retried for a minute"
    assert (tmp_path / "run" / "report.md").is_file()


def test_flags_show_no_type_in_help() -> None:
    root = typer.main.get_command(app)
    stack: list[tuple[tuple[str, ...], Any]] = [((), root)]
    seen = 0
    while stack:
        path, command = stack.pop()
        text = _run([*path, "--help"]).output
        assert "<bool>" not in text, path
        seen += 1
        if hasattr(command, "list_commands"):
            context = typer.Context(command)
            stack += [((*path, name), command.get_command(context, name)) for name in command.list_commands(context)]
    assert seen > 15
    assert "<path>" in _run(["eval", "--help"]).output  # options that take a value still show its type
