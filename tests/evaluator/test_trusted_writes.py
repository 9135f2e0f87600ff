"""What the sandboxed judge hands back is checked before it is believed or cached (`evaluator.trusted`): its result
must be this task's with sane numbers, and a baseline record is written only under this task's own key with
finite, positive times."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cuda_agent.evaluator.baselines import baseline_key
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.result import failure
from cuda_agent.evaluator.stats import TimingStats
from cuda_agent.evaluator.trusted import accept, read_reply_file, store_baselines
from cuda_agent.tasks.task import Task

TASK = Task(id="user/t", code="import torch\n")
OTHER = Task(id="user/u", code="import torch  # another\n")
PARTS = {"gpu_name": "cpu", "torch_version": "2.11", "cuda_version": None}
SETTINGS = {"warmup": 5, "reps": 50, "sets": 3, "device": "cpu"}


def _job(tmp_path: Path, task: Task = TASK) -> dict:
    return {"task": task.to_dict(), "config": EvalConfig(baseline_cache_dir=str(tmp_path)).to_dict()}


def _record(task: Task, median: float = 1.0) -> dict:
    stats = TimingStats.from_samples([median, median * 1.1, median * 0.9], clock="host").to_dict()
    return {"key": baseline_key(task.code_hash, settings=SETTINGS, **PARTS), "times": {"eager": stats, "compile": stats},
            "meta": {**PARTS, "settings": SETTINGS, "task": task.code_hash}}


def test_a_result_of_this_task_is_accepted_and_others_refused(tmp_path: Path) -> None:
    good = failure(TASK.id, "incorrect", "wrong output").to_dict()
    assert accept({"result": good}, _job(tmp_path)).stage == "incorrect"
    with pytest.raises(ValueError, match="not 'user/t'"):
        accept({"result": failure(OTHER.id, "incorrect", "x").to_dict()}, _job(tmp_path))
    for field, value in (("reward", 7), ("speedup_eager", math.inf), ("speedup_compile", -2.0), ("correct", "yes")):
        with pytest.raises(ValueError):
            accept({"result": {**good, field: value}}, _job(tmp_path))
    with pytest.raises(ValueError):
        accept({"result": "timed"}, _job(tmp_path))


def test_baselines_are_written_only_under_this_tasks_key_with_sane_times(tmp_path: Path) -> None:
    assert store_baselines([_record(OTHER)], _job(tmp_path)) == 0  # another task's key: a poisoning attempt
    assert store_baselines([_record(TASK, median=-1.0)], _job(tmp_path)) == 0
    forged = _record(TASK)
    forged["key"] = "0" * 40
    assert store_baselines([forged, "junk", {"key": 1}], _job(tmp_path)) == 0
    assert list(tmp_path.glob("*.json")) == []
    assert store_baselines([_record(TASK)], _job(tmp_path)) == 1
    (written,) = tmp_path.glob("*.json")
    assert json.loads(written.read_text())["key"] == _record(TASK)["key"]


def test_the_reply_file_must_be_a_bounded_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text(json.dumps({"result": {}}))
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert read_reply_file(target) == {"result": {}}
    assert read_reply_file(link) is None
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_reply_file(tmp_path / "list.json") is None
    assert read_reply_file(tmp_path / "missing.json") is None


def test_the_judge_copies_only_the_staged_files_unchanged(tmp_path: Path) -> None:
    """The warm worker's judges can write where solutions are staged: a staged file changed after the build, or one
    added, never reaches the candidate."""
    from cuda_agent.evaluator.judge.prepare import PrepareError, restore
    from cuda_agent.evaluator.trusted import staged_hashes

    stage, scratch = tmp_path / "stage", tmp_path / "scratch"
    (stage / "inline").mkdir(parents=True)
    scratch.mkdir()
    (stage / "solution.py").write_text("class ModelNew: pass\n")
    (stage / "inline" / "ext.so").write_bytes(b"\x7fELF...")
    staged = {"stage": str(stage), "files": staged_hashes(stage),
              "fields": {"kind": "single_file", "module": "/scratch/solution.py"}}
    (stage / "planted.py").write_text("evil")
    prepared = restore(staged, scratch)
    assert prepared.kind == "single_file"
    assert sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*") if p.is_file()) == \
        ["inline/ext.so", "solution.py"]
    (stage / "solution.py").write_text("class ModelNew: swapped = True\n")
    with pytest.raises(PrepareError, match="changed"):
        restore(staged, tmp_path / "scratch")


def test_every_prepared_field_survives_staging(tmp_path: Path) -> None:
    """What the trusted caller learnt while building (the solution's own kernels, its Triton kernels, the notes)
    reaches the judge: a Triton solution whose kernel names were dropped on the way was refused in strict mode as
    computing only with PyTorch (H200, 2026-12-03)."""
    import dataclasses
    import json

    from cuda_agent.evaluator.judge.prepare import Prepared, restore, staged_fields
    from cuda_agent.evaluator.trusted import staged_hashes

    stage, scratch = tmp_path / "stage", tmp_path / "scratch"
    stage.mkdir()
    scratch.mkdir()
    (stage / "solution.py").write_text("class ModelNew: pass\n")
    built = Prepared("single_file", stage, "/scratch/solution.py", library="/scratch/lib.so", inline_dir="/scratch/i",
                     source="@triton.jit\ndef k(): pass\n", own_kernels=("k", "add_kernel"), jit_kernels=("k",),
                     build_seconds=1.5, notes=["Triton: kernels compile at their first launch"])
    staged = {"stage": str(stage), "files": staged_hashes(stage),
              "fields": json.loads(json.dumps(staged_fields(built)))}  # the way the reply file carries it
    restored = restore(staged, scratch)
    assert restored.scratch == scratch
    for f in dataclasses.fields(Prepared):
        if f.name != "scratch":
            assert getattr(restored, f.name) == getattr(built, f.name), f.name


def test_a_triton_solutions_kernels_reach_the_judge_through_staging(tmp_path: Path) -> None:
    """The trusted caller's staging of a Triton single file (no kernels built: its kernels compile at their first
    launch) hands the judge the kernels' names, which strict mode counts as the solution's own code."""
    from cuda_agent.evaluator import EvalConfig
    from cuda_agent.evaluator.judge.prepare import restore
    from cuda_agent.evaluator.trusted import stage
    from cuda_agent.tasks.task import Task

    task = Task(id="user/relu", code="import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                "    def forward(self, x):\n        return torch.relu(x)\n\n\ndef get_inputs():\n"
                "    return [torch.randn(64)]\n\n\ndef get_init_inputs():\n    return []\n")
    solution = tmp_path / "solution.py"
    solution.write_text("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
                        "@triton.jit\ndef relu_kernel(x, y, n, BLOCK: tl.constexpr):\n    pass\n\n\n"
                        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    job = stage({"task": task.to_dict(), "solution": str(solution)}, EvalConfig(mode="strict", device="cpu"),
                tmp_path / "job")
    assert isinstance(job, dict), job
    assert job["prepared"]["fields"]["jit_kernels"] == ["relu_kernel"]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert restore(job["prepared"], scratch).jit_kernels == ("relu_kernel",)
