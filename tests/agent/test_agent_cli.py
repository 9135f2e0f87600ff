"""`cuda-agent optimize`: what it says when it cannot run, and a scripted run of the bundled example."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cuda_agent.cli.optimize import register
from cuda_agent.compiler.toolchain import cuda_available


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.command("noop")
    def noop() -> None:  # a second command keeps typer from collapsing the app into `optimize`
        pass

    return app


@pytest.fixture
def no_endpoint(monkeypatch) -> None:
    for var in ("OPENAI_BASE_URL", "CUDA_AGENT_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.skipif(cuda_available(), reason="checks the message given on a machine without a GPU")
def test_says_what_is_missing_without_endpoint_or_gpu(app, no_endpoint) -> None:
    result = CliRunner().invoke(app, ["optimize"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "OPENAI_BASE_URL" in text and "CUDA_AGENT_MODEL" in text and "--policy scripted" in text
    assert "no GPU" in text and "verification" in text


def test_bad_task_file_is_named(app, no_endpoint, tmp_path: Path) -> None:
    bad = tmp_path / "broken_model.py"
    bad.write_text("import torch\nclass Model(:\n")
    result = CliRunner().invoke(app, ["optimize", str(bad), "--policy", "scripted", "--script", "x.json"])
    assert result.exit_code == 2
    assert "broken_model.py" in result.output.replace("\n", "") and "syntax error" in result.output


def test_resume_needs_a_saved_run(app, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["optimize", "--policy", "scripted", "--verify", "skip", "--resume",
                                      "--out", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "no trajectory" in result.output


def test_out_holding_a_run_needs_resume(app, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "trajectory.jsonl").write_text('{"type": "header"}\n')
    result = CliRunner().invoke(app, ["optimize", "--policy", "scripted", "--verify", "skip", "--out", str(out)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "already holds a run" in text and "--resume" in text, result.output
    assert (out / "trajectory.jsonl").read_text() == '{"type": "header"}\n'
    assert not (out / "workspace").exists()


@pytest.mark.slow
def test_scripted_example_run_writes_report(app, tmp_path: Path, build_cache: Path, sandbox_mode: str,
                                            monkeypatch) -> None:
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(build_cache.parent))
    monkeypatch.setenv("CUDA_AGENT_ARCH", "90")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["optimize", "--policy", "scripted", "--verify", "skip", "--sandbox",
                                      sandbox_mode, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "ended: submitted after 10 turns" in result.output
    report = (out / "report.md").read_text()
    assert "example/scaled_silu" in report and "verification skipped" in report
    summary = json.loads((out / "result.json").read_text())
    assert summary["reason"] == "submitted" and summary["turns"] == 10 and summary["best"] is None
    assert (out / "trajectory.jsonl").is_file()
    assert list((out / "workspace").glob("*/kernels/scaled_silu.cu"))
