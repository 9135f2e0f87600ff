"""`cuda-agent tasks`: a bad file is one line naming it and the rest still loads; nothing loaded is an error; the
warnings PyTorch raises while tasks run on the meta device are not shown."""
from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

from typer.testing import CliRunner

from cuda_agent.cli.main import app
from cuda_agent.tasks import load_task_file
from helpers import RELU_TASK


# nn.TransformerEncoder warns (a UserWarning from PyTorch) on every build when batch_first is off
WARNS = RELU_TASK.replace('''class Model(nn.Module):
''', '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 1)

''')


def _tasks(*args: str):
    return CliRunner().invoke(app, ["tasks", *args], terminal_width=400)


def test_a_file_that_is_not_utf8_is_one_line_and_the_rest_loads(tmp_path: Path) -> None:
    (tmp_path / "a_good.py").write_text(RELU_TASK)
    (tmp_path / "b_latin1.py").write_bytes(RELU_TASK.encode() + "# caf\xe9\n".encode("latin-1"))
    (tmp_path / "c_good.py").write_text(RELU_TASK)
    result = _tasks(str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "user/a_good" in result.output and "user/c_good" in result.output
    lines = [line for line in result.output.splitlines() if "b_latin1.py" in line]
    assert len(lines) == 1 and "not UTF-8" in lines[0], result.output
    assert "Traceback" not in result.output and "UnicodeDecodeError" not in result.output


def test_nothing_loaded_exits_non_zero(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _tasks(str(empty))
    assert result.exit_code == 1 and "no task loaded" in result.output
    (tmp_path / "only_bad").mkdir()
    (tmp_path / "only_bad" / "bad.py").write_text("def broken(:\n")
    result = _tasks(str(tmp_path / "only_bad"))
    assert result.exit_code == 1 and "syntax error" in result.output and "no task loaded" in result.output


def test_filters_that_match_nothing_exit_non_zero(tmp_path: Path) -> None:
    (tmp_path / "relu.py").write_text(RELU_TASK)
    assert _tasks(str(tmp_path)).exit_code == 0
    result = _tasks(str(tmp_path), "--id", "nothing*")
    assert result.exit_code == 1 and "matches the filters" in result.output


def test_pytorch_warnings_while_loading_are_not_shown(tmp_path: Path) -> None:
    (tmp_path / "encoder.py").write_text(WARNS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_task_file(tmp_path / "encoder.py")
    assert not caught
    proc = subprocess.run([sys.executable, "-W", "always", "-m", "cuda_agent.cli.main", "tasks", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "user/encoder" in proc.stdout
    assert "Warning" not in proc.stdout + proc.stderr and "nested" not in proc.stdout + proc.stderr
