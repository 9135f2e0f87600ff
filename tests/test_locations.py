"""Data is found through configuration (`cuda_agent.locations`), never by where the package happens to lie."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuda_agent.cli.main import app
from cuda_agent.errors import ConfigError, TaskError
from cuda_agent.locations import kernelbench_cache, kernelbench_root, rl_config_path
from cuda_agent.tasks.loaders import resolve_task
from helpers import RELU_TASK

REPO_CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "rl"


def _kernelbench(root: Path) -> Path:
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "19_ReLU.py").write_text(RELU_TASK)
    return root


@pytest.fixture
def unconfigured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No variable set, an empty cache, and a working directory with nothing in it."""
    for name in ("CUDA_AGENT_KERNELBENCH", "CUDA_AGENT_RL_CONFIGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_without_kernelbench_an_id_names_the_setting_and_the_fetch(unconfigured: Path) -> None:
    assert kernelbench_root() is None
    with pytest.raises(TaskError, match="CUDA_AGENT_KERNELBENCH.*cuda-agent data fetch kernelbench"):
        resolve_task("L1/19_ReLU")


def test_the_fetched_copy_is_the_default(unconfigured: Path) -> None:
    _kernelbench(kernelbench_cache())
    assert kernelbench_root() == kernelbench_cache()
    assert resolve_task("L1/19").id == "L1/19_ReLU"


def test_the_variable_wins_over_the_fetched_copy(unconfigured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _kernelbench(kernelbench_cache())
    mine = _kernelbench(unconfigured / "mine")
    monkeypatch.setenv("CUDA_AGENT_KERNELBENCH", str(mine))
    assert kernelbench_root() == mine


def test_a_variable_that_points_nowhere_is_an_error_not_a_fallback(unconfigured: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _kernelbench(kernelbench_cache())
    monkeypatch.setenv("CUDA_AGENT_KERNELBENCH", str(unconfigured / "missing"))
    with pytest.raises(ConfigError, match="CUDA_AGENT_KERNELBENCH=.*missing: no level1/"):
        kernelbench_root()


def test_rl_configs_come_from_the_variable_or_the_current_directory(unconfigured: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="CUDA_AGENT_RL_CONFIGS"):
        rl_config_path("ppo")
    monkeypatch.setenv("CUDA_AGENT_RL_CONFIGS", str(REPO_CONFIGS))
    assert rl_config_path("warmup") == REPO_CONFIGS / "warmup.yaml"
    monkeypatch.delenv("CUDA_AGENT_RL_CONFIGS")
    monkeypatch.chdir(REPO_CONFIGS.parents[1])
    assert rl_config_path("ppo").resolve() == REPO_CONFIGS / "ppo.yaml"


def test_train_without_configs_says_how_to_point_at_them(unconfigured: Path) -> None:
    result = CliRunner().invoke(app, ["train", "ppo", "--dry-run"])
    assert result.exit_code == 1
    assert "CUDA_AGENT_RL_CONFIGS" in result.output and "--config" in result.output


def test_bench_with_a_wrong_setting_is_one_line_naming_it(unconfigured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_AGENT_KERNELBENCH", str(unconfigured / "missing"))
    result = CliRunner().invoke(app, ["bench", "run", "--tasks", "kernelbench", "--out", str(unconfigured / "run")])
    assert result.exit_code == 2, result.output
    assert "CUDA_AGENT_KERNELBENCH=" in result.output and "no level1/" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
