"""Baseline tables: KernelBench's timing-file layout in and out, our own table format, and (on a GPU) measuring."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.bench.baselines import BaselineTable, import_kernelbench, measure_task, measure_tasks
from cuda_agent.errors import ConfigError
from cuda_agent.tasks import Task

EAGER = {
    "level1": {
        "19_ReLU.py": {"mean": 4.27, "std": 0.008, "min": 4.26, "max": 4.35, "num_trials": 100,
                       "hardware": "NVIDIA H200", "device": "cuda:0"},
        "2_Standard_matrix_multiplication_.py": {"mean": 2.64, "std": 0.0039, "min": 2.64, "max": 2.67,
                                                 "num_trials": 100, "hardware": "NVIDIA H200", "device": "cuda:0"},
    },
    "level3": {"1_MLP.py": {"mean": 1.5, "std": 0.01, "min": 1.4, "max": 1.6, "num_trials": 100,
                            "hardware": "NVIDIA H200", "device": "cuda:0"}},
}
COMPILED = {"level1": {"19_ReLU.py": {"mean": 4.0, "std": 0.01, "min": 3.9, "max": 4.1, "num_trials": 100,
                                      "hardware": "NVIDIA H200", "device": "cuda:0"}}}


def test_kernelbench_files_round_trip(tmp_path: Path) -> None:
    (tmp_path / "eager.json").write_text(json.dumps(EAGER))
    (tmp_path / "compile.json").write_text(json.dumps(COMPILED))
    table = import_kernelbench(tmp_path / "eager.json", tmp_path / "compile.json")
    assert list(table.entries) == ["L1/2_Standard_matrix_multiplication_", "L1/19_ReLU", "L3/1_MLP"]
    relu = table.entries["L1/19_ReLU"]
    assert (relu.level, relu.file, relu.eager.mean, relu.compile.mean) == (1, "19_ReLU.py", 4.27, 4.0)
    assert table.entries["L3/1_MLP"].compile is None and table.hardware == "NVIDIA H200"
    assert table.to_kernelbench("eager") == EAGER
    assert table.to_kernelbench("compile") == COMPILED
    eager_path, compile_path = table.export_kernelbench(tmp_path / "timing" / "H200")
    assert json.loads(eager_path.read_text()) == EAGER
    assert compile_path.name == "baseline_time_torch_compile_inductor_default.json"
    back = BaselineTable.load(table.save(tmp_path / "baselines.json"))
    assert back.entries == table.entries and back.hardware == table.hardware


def test_malformed_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"levelX": {}}))
    with pytest.raises(ConfigError, match="bad.json: unexpected key 'levelX'"):
        import_kernelbench(bad)
    bad.write_text(json.dumps({"level1": {"1_a.py": {"std": 1}}}))
    with pytest.raises(ConfigError, match="1_a.py: malformed timing stats"):
        import_kernelbench(bad)
    with pytest.raises(ConfigError, match="not a cuda-agent baseline table"):
        BaselineTable.from_dict(EAGER)
    with pytest.raises(ConfigError, match="which must be"):
        BaselineTable("x").to_kernelbench("fast")


SMALL_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.rand(1024, 1024)]

def get_init_inputs():
    return []
"""


@pytest.mark.gpu
def test_measure_small_task_on_gpu(tmp_path: Path) -> None:
    task = Task(id="L1/999_small", code=SMALL_TASK, level=1, name="999_small")
    entry = measure_task(task, warmup=2, reps=10)
    assert entry.eager is not None and entry.compile is not None
    assert 0 < entry.eager.min <= entry.eager.mean <= entry.eager.max and entry.eager.num_trials >= 10
    table = measure_tasks([task], save_to=tmp_path / "b.json", warmup=2, reps=10)
    assert BaselineTable.load(tmp_path / "b.json").entries.keys() == {"L1/999_small"}
    assert table.to_kernelbench("eager")["level1"]["999_small.py"]["num_trials"] >= 10


def test_measure_task_runs_the_task_in_its_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's code runs sandboxed: it sees no secret of this process, and its times still come back."""
    from cuda_agent.sandbox import sandbox_available

    if not sandbox_available("userns"):
        pytest.skip("bubblewrap cannot run here")
    monkeypatch.setenv("OPENAI_API_KEY", "canary-bench-91c3")
    spy = SMALL_TASK.replace("return [torch.rand(1024, 1024)]",
                             "import os\n    assert not os.environ.get('OPENAI_API_KEY'), os.environ['OPENAI_API_KEY']\n"
                             "    assert not os.path.exists(" + repr(str(tmp_path)) + ")\n"
                             "    return [torch.rand(64, 64)]")
    entry = measure_task(Task(id="L1/998_spy", code=spy, level=1, name="998_spy"), warmup=1, reps=3, device="cpu")
    assert entry.eager is not None and entry.eager.mean > 0 and entry.compile is not None
    with pytest.raises(RuntimeError, match="boom"):
        measure_task(Task(id="L1/997_bad", code=SMALL_TASK.replace("return torch.relu(x) * 2.0",
                                                                   "raise ValueError('boom')"), level=1),
                     warmup=1, reps=3, device="cpu")
