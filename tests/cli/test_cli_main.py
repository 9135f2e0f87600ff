"""The `cuda-agent` command itself: --version, shell completion, flag naming in help texts and in error messages."""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

import cuda_agent
from cuda_agent.cli.main import app
from helpers import RELU_TASK


def test_version_matches_the_installed_package() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"cuda-agent {cuda_agent.__version__}\n"
    assert importlib.metadata.version("cuda-agent") == cuda_agent.__version__


def _complete(words: str) -> list[str]:
    env = {"_CUDA_AGENT_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
    result = CliRunner().invoke(app, [], prog_name="cuda-agent", env=env)
    assert result.exit_code == 0, result.output
    return result.output.split()


def test_shell_completion_completes_commands_and_choices() -> None:
    assert _complete("cuda-agent da") == ["data"]
    assert _complete("cuda-agent data fetch o") == ["ops6k"]
    # In a process of its own: typer's completion reads process-wide state that other tests' CLI runs leave behind.
    script = subprocess.run([sys.executable, "-m", "cuda_agent.cli.main", "--show-completion", "bash"],
                            capture_output=True, text=True, timeout=120)
    assert script.returncode == 0 and "complete_bash" in script.stdout, script.stderr[-1000:]


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command under ``command`` (typer's own click objects: matched by what they do, not their class)."""
    found = [(path, command)]
    if hasattr(command, "list_commands"):
        context = typer.Context(command)
        for name in command.list_commands(context):
            found += _commands(command.get_command(context, name), (*path, name))
    return found


def test_no_flag_is_named_no_no() -> None:
    commands = _commands(typer.main.get_command(app))
    assert len(commands) > 15
    for path, command in commands:
        for param in command.params:
            names = [*param.opts, *getattr(param, "secondary_opts", [])]
            assert not any(n.startswith("--no-no-") for n in names), (path, names)
        text = CliRunner().invoke(app, [*path, "--help"], terminal_width=200).output
        assert "--no-no-" not in text, path
    report_help = CliRunner().invoke(app, ["bench", "report", "--help"], terminal_width=200).output
    assert "--no-reference" in report_help


def test_bench_offline_without_gpu_names_the_flags(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever this machine has
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "relu.py").write_text(RELU_TASK)
    (tmp_path / "solutions").mkdir()
    result = CliRunner().invoke(app, ["bench", "offline", "--tasks", str(tmp_path / "tasks"),
                                      "--solutions", str(tmp_path / "solutions"), "--out", str(tmp_path / "out"),
                                      "--store", f"sqlite:///{tmp_path / 's.db'}"], terminal_width=400)
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "no GPU found" in text and "--gpus" in text and "--standin" in text
    assert "gpus=" not in text and "StandInEvaluator" not in text


def test_bench_selection_names_the_flags(tmp_path: Path) -> None:
    (tmp_path / "relu.py").write_text(RELU_TASK)
    result = CliRunner().invoke(app, ["bench", "offline", "--tasks", str(tmp_path), "--solutions", str(tmp_path),
                                      "--ids", "L9/*", "--standin"], terminal_width=400)
    assert result.exit_code == 2
    assert "with --ids L9/*" in result.output and "ids=" not in result.output
