"""`cuda-agent bench` end to end on CPU: offline scoring through the stand-in evaluator into a report, a report from
stored results, and KernelBench baseline import/export."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuda_agent.bench.results import load_results
from cuda_agent.cli.main import app
from cuda_agent.locations import kernelbench_root

SOLUTIONS = Path(__file__).resolve().parents[2] / "benchmarks" / "solutions"
pytest.importorskip("matplotlib")


@pytest.mark.slow
def test_offline_standin_then_report_from_stored_results(tmp_path: Path) -> None:
    root = kernelbench_root()
    if root is None:
        pytest.skip("KernelBench tasks not found")
    out = tmp_path / "off"
    result = CliRunner().invoke(app, [
        "bench", "offline", "--solutions", str(SOLUTIONS), "--tasks", str(root), "--ids", "L1/19_ReLU,L1/20_LeakyReLU,L3/1_MLP",
        "--out", str(out), "--store", f"sqlite:///{tmp_path / 's.db'}", "--standin", "--run-id", "t1",
    ])
    assert result.exit_code == 0, result.output
    saved = load_results(out / "results.json")
    assert saved.tasks == {"L1/19_ReLU": 1, "L1/20_LeakyReLU": 1, "L3/1_MLP": 3}
    assert saved.missing == ["L1/20_LeakyReLU"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["pass_rate"] == pytest.approx(2 / 3)
    assert "../" in (out / "report.md").read_text()  # kernel links point back into the solutions folder
    again = CliRunner().invoke(app, ["bench", "report", str(out / "results.json"), "--out", str(tmp_path / "rep2"),
                                     "--faster-threshold", "1.0"])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "rep2" / "report.html").stat().st_size > 10_000
    assert json.loads((tmp_path / "rep2" / "metrics.json").read_text())["faster_threshold"] == 1.0


def test_baselines_import_and_export(tmp_path: Path) -> None:
    eager = {"level1": {"19_ReLU.py": {"mean": 4.0, "std": 0.1, "min": 3.9, "max": 4.2, "num_trials": 100,
                                       "hardware": "NVIDIA H200", "device": "cuda:0"}}}
    (tmp_path / "e.json").write_text(json.dumps(eager))
    result = CliRunner().invoke(app, ["bench", "baselines", "--import", str(tmp_path / "e.json"),
                                      "--out", str(tmp_path / "b.json"), "--export", str(tmp_path / "kb")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "kb" / "baseline_time_torch.json").read_text()) == eager
    assert json.loads((tmp_path / "b.json").read_text())["tasks"][0]["task_id"] == "L1/19_ReLU"


def test_bad_results_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{}")
    result = CliRunner().invoke(app, ["bench", "report", str(tmp_path / "r.json")])
    assert result.exit_code == 2 and "not a benchmark results file" in " ".join(result.output.split())
