"""Task loading: all of KernelBench, bad files reported and skipped, filters, sampling, parquet."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.errors import TaskError
from cuda_agent.tasks import load_kernelbench_dir, load_parquet, load_task_file, load_tasks, resolve_task
from cuda_agent.locations import kernelbench_root

GOOD = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
    def forward(self, x):
        return torch.relu(x) * self.scale

def get_inputs():
    return [torch.rand(4096, 393216)]

def get_init_inputs():
    return [2.0]
'''

KB = kernelbench_root()
needs_kernelbench = pytest.mark.skipif(KB is None, reason="KernelBench data not found")


@pytest.fixture(scope="module")
def kernelbench():
    return load_kernelbench_dir(KB)


@needs_kernelbench
def test_all_250_kernelbench_tasks_load(kernelbench):
    assert len(kernelbench) == 250, [f.reason for f in kernelbench.failures]
    assert not kernelbench.failures
    by_level = {lv: len(kernelbench.filter(levels=[lv])) for lv in (1, 2, 3)}
    assert by_level == {1: 100, 2: 100, 3: 50}
    assert len({t.id for t in kernelbench}) == 250


@needs_kernelbench
def test_filters_and_sampling(kernelbench):
    relu = kernelbench["L1/19_ReLU"]
    assert relu.level == 1 and relu.name == "19_ReLU" and "relu" in relu.ops
    assert [t.id for t in kernelbench.filter(ids=["L1/19_*"])] == ["L1/19_ReLU"]
    conv_tasks = kernelbench.filter(levels=[2], ops=["conv2d"])
    assert conv_tasks and all(t.level == 2 and "Conv2d" in t.ops for t in conv_tasks)
    first = kernelbench.sample(10, seed=3)
    assert len(first) == 10 and [t.id for t in first] == [t.id for t in kernelbench.sample(10, seed=3)]
    assert [t.id for t in first] != [t.id for t in kernelbench.sample(10, seed=4)]


def test_huge_inputs_validate_without_allocating(tmp_path: Path):
    path = tmp_path / "big.py"
    path.write_text(GOOD)  # 4096 x 393216 floats = 6.4 GB if allocated for real
    task = load_task_file(path)
    assert task.id == "user/big" and task.ops == ("relu",)


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        (GOOD.replace("def forward(self, x):", "def forward(self, x)"), "syntax error at line"),
        (GOOD.replace("def get_inputs():", "def other():"), "missing get_inputs"),
        ("import not_a_module_anywhere\n" + GOOD, "import failed: ModuleNotFoundError"),
        (GOOD.replace("return [torch.rand(4096, 393216)]", "raise ValueError('boom')"), "get_inputs() raised ValueError: boom"),
        (GOOD.replace("return [2.0]", "return [1, 2, 3]"), "Model(*get_init_inputs()) raised TypeError"),
    ],
)
def test_bad_task_file_names_file_and_cause(tmp_path: Path, code: str, cause: str):
    path = tmp_path / "broken_task.py"
    path.write_text(code)
    with pytest.raises(TaskError) as info:
        load_task_file(path)
    assert str(path) in str(info.value)
    assert cause in str(info.value)


def test_loading_a_folder_reports_bad_files_and_keeps_the_rest(tmp_path: Path):
    (tmp_path / "a_good.py").write_text(GOOD)
    (tmp_path / "b_bad.py").write_text(GOOD.replace("class Model", "class NotModel"))
    (tmp_path / "c_good.py").write_text(GOOD.replace("2.0", "3.0"))
    task_set = load_tasks(str(tmp_path))
    assert [t.name for t in task_set] == ["a_good", "c_good"]
    assert len(task_set.failures) == 1
    assert "b_bad.py" in task_set.failures[0].origin and "missing Model" in task_set.failures[0].reason


def test_parquet_in_ops6k_layout(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = {
        "ops": ["['relu', 'mul']", "['bad']"],
        "data_source": ["synth", "synth"],
        "code": [GOOD, "def broken(:"],
    }
    path = tmp_path / "ops.parquet"
    pq.write_table(pa.table(rows), path)
    task_set = load_parquet(path)
    assert len(task_set) == 1 and task_set[0].ops == ("relu", "mul")
    assert task_set[0].metadata["data_source"] == "synth"
    assert len(task_set.failures) == 1 and "#1" in task_set.failures[0].origin
    with pytest.raises(TaskError, match="no 'code' column"):
        pq.write_table(pa.table({"x": [1]}), tmp_path / "nocode.parquet")
        load_parquet(tmp_path / "nocode.parquet")


@needs_kernelbench
def test_resolve_kernelbench_ids():
    assert resolve_task("L1/19_ReLU").name == "19_ReLU"
    assert resolve_task("level2/1").level == 2
    with pytest.raises(TaskError, match="no task 999"):
        resolve_task("L1/999")


def test_rows_in_the_hub_kernelbench_layout():
    """The hub's KernelBench splits carry code, level, name and problem_id: ids match the folder loader's."""
    from cuda_agent.tasks import load_rows

    rows = [{"code": GOOD, "level": 1, "name": "19_ReLU", "problem_id": 19},
            {"code": GOOD.replace("get_inputs", "make_inputs"), "level": 2, "name": "7_Broken", "problem_id": 7}]
    task_set = load_rows(rows, source="kernelbench-hf", origin="hub:level_1")
    assert [t.id for t in task_set] == ["L1/19_ReLU"]
    assert task_set[0].level == 1 and task_set[0].metadata["problem_id"] == 19
    assert "missing get_inputs" in task_set.failures[0].reason and task_set.failures[0].origin == "hub:level_1#1"
