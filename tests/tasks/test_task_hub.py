"""Fetching task sets from the hub: one quick line when the hub cannot be reached, the cached copy used without
the network, and the hub's rows written in a KernelBench checkout's layout."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuda_agent.cli.main import app
from cuda_agent.errors import TaskError
from cuda_agent.locations import kernelbench_cache, ops6k_cache
from cuda_agent.tasks import load_kernelbench_dir, load_tasks
from cuda_agent.tasks.hub import (
    KERNELBENCH_HUB_ID,
    check_hub_reachable,
    write_kernelbench,
    write_parquet,
)
from helpers import RELU_TASK


KERNELBENCH_SPLITS = {
    "level_1": [{"code": RELU_TASK, "level": 1, "name": "19_ReLU", "problem_id": 19},
                {"code": RELU_TASK, "level": 1, "name": "2_Standard_matrix_multiplication_.py", "problem_id": 2}],
    "level_2": [{"code": RELU_TASK, "level": 2, "name": "Conv2d_ReLU", "problem_id": 5}],
    "level_4": [{"code": RELU_TASK, "level": 4, "name": "1_gpt2", "problem_id": 1}],
}


@pytest.fixture
def no_hub(tmp_path: Path, monkeypatch) -> Path:
    """A cache of our own and a hub address where nothing listens (refused at once, as offline machines are)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("argv", [["data", "fetch", "kernelbench"], ["data", "fetch", "ops6k"],
                                  ["tasks", "hub:kernelbench"]])
def test_unreachable_hub_is_one_quick_line(no_hub: Path, argv: list[str]) -> None:
    start = time.monotonic()
    result = CliRunner().invoke(app, argv)
    assert time.monotonic() - start < 10
    assert result.exit_code == 2
    lines = _lines(result.output)
    assert len(lines) == 1 and "cannot reach the hub" in lines[0], result.output
    assert "Retrying" not in result.output and not (no_hub / "data").exists()


def test_hub_switched_off_says_so(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TaskError, match="HF_HUB_OFFLINE is set.*CUDA_AGENT_KERNELBENCH"):
        check_hub_reachable(KERNELBENCH_HUB_ID)


def test_kernelbench_rows_become_a_checkout_layout(tmp_path: Path) -> None:
    dest = tmp_path / "kb"
    assert write_kernelbench(KERNELBENCH_SPLITS, dest) == 3  # level 4 is not part of the benchmark's 1-3
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.py")) == [
        "level1/19_ReLU.py", "level1/2_Standard_matrix_multiplication_.py", "level2/5_Conv2d_ReLU.py"]
    task_set = load_kernelbench_dir(dest)
    assert [t.id for t in task_set] == ["L1/2_Standard_matrix_multiplication_", "L1/19_ReLU", "L2/5_Conv2d_ReLU"]
    with pytest.raises(TaskError, match="no level 1-3 rows"):
        write_kernelbench({"level_4": KERNELBENCH_SPLITS["level_4"]}, tmp_path / "none")
    assert not (tmp_path / "none").exists() and (dest / "level1" / "19_ReLU.py").is_file()


def test_cached_copies_are_used_without_the_network(no_hub: Path) -> None:
    write_kernelbench(KERNELBENCH_SPLITS, kernelbench_cache())
    write_parquet({"train": [{"ops": "['relu']", "data_source": "synth", "code": RELU_TASK}]}, ops6k_cache())
    fetched = CliRunner().invoke(app, ["data", "fetch", "kernelbench"])
    assert fetched.exit_code == 0, fetched.output
    assert "already in the cache" in fetched.output and str(kernelbench_cache()) in fetched.output
    assert [t.id for t in load_tasks("hub:kernelbench")] == [
        "L1/2_Standard_matrix_multiplication_", "L1/19_ReLU", "L2/5_Conv2d_ReLU"]
    ops = load_tasks("hub:ops6k")
    assert len(ops) == 1 and ops[0].ops == ("relu",) and ops[0].source == "ops6k"
    again = CliRunner().invoke(app, ["data", "fetch", "kernelbench", "--force"])
    assert again.exit_code == 2 and "cannot reach the hub" in again.output
    assert (kernelbench_cache() / "level1" / "19_ReLU.py").is_file()  # a failed refresh keeps the copy
