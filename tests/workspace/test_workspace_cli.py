"""`cuda-agent workspace new DIR --force`: replaces a workspace, never another folder; messages name --force."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cuda_agent.cli.main import app
from helpers import RELU_TASK


def _new(task: Path, folder: Path, *flags: str):
    return CliRunner().invoke(app, ["workspace", "new", str(task), str(folder), *flags], terminal_width=400)


def test_force_refuses_a_folder_that_is_not_a_workspace(tmp_path: Path) -> None:
    task = tmp_path / "relu.py"
    task.write_text(RELU_TASK)
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"not ours")
    result = _new(task, folder, "--force")
    assert result.exit_code == 2
    assert "not a workspace" in " ".join(result.output.split())
    assert (folder / "holiday.jpg").read_bytes() == b"not ours"


def test_an_existing_workspace_needs_force_and_force_replaces_it(tmp_path: Path) -> None:
    task = tmp_path / "relu.py"
    task.write_text(RELU_TASK)
    folder = tmp_path / "ws"
    assert _new(task, folder).exit_code == 0
    (folder / "kernels" / "mine.cu").write_text("// draft")
    refused = _new(task, folder)
    text = " ".join(refused.output.split())
    assert refused.exit_code == 2 and "--force" in text and "overwrite" not in text
    assert (folder / "kernels" / "mine.cu").exists()
    replaced = _new(task, folder, "--force")
    assert replaced.exit_code == 0, replaced.output
    assert not (folder / "kernels" / "mine.cu").exists() and (folder / ".cuda_agent" / "manifest.json").is_file()
