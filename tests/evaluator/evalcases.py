"""The evaluator's case catalogue (imported by its tests; not a test module).

Cases live in tests/evaluator/cases/: ``cpu/*.py`` are single-file relaxed/strict candidates for the small tasks
in ``tasks/`` (first line: ``# task: NAME  mode: MODE  expect: RULE|correct``); ``gpu/<name>/`` are workspaces
(model_new.py + kernels/*.cu) with a ``CASE`` file holding the same header and a KernelBench id or a task name.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from cuda_agent.tasks import Task, load_task_file
from cuda_agent.locations import kernelbench_root

CASES = Path(__file__).parent / "cases"
_HEADER = re.compile(r"(\w+): (\S+)")


@dataclass(frozen=True)
class Case:
    name: str
    solution: Path
    task: str
    mode: str
    expect: str

    def load_task(self) -> Task:
        return resolve_task(self.task)

    @property
    def profiled(self) -> bool:
        """Whether evaluating the case needs the timing step (honest cases, and cheats only timing can see)."""
        return self.expect == "correct" or self.expect in TIMING_RULES


SOLUTIONS = CASES.parents[2] / "benchmarks" / "solutions"


def solution_case(spec: str) -> Case:
    """The handwritten solution of KernelBench task ``spec`` (e.g. ``L1/23_Softmax``) in benchmarks/solutions, as an
    honest strict case."""
    level, name = spec.split("/", 1)
    folder = SOLUTIONS / f"{level}_{name}"
    return Case(folder.name, folder, spec, "strict", "correct")


@functools.lru_cache(maxsize=None)
def resolve_task(spec: str) -> Task:
    """A task file under cases/tasks (by name) or a KernelBench id like L1/19_ReLU (skips when data is absent).
    Loaded once a process: a local task file is validated in the sandbox when read (8-17 s a time on the H200 for
    `row_sum`, which the evaluator benchmark counted in every evaluation of its cases)."""
    local = CASES / "tasks" / f"{spec}.py"
    if local.is_file():
        return load_task_file(local)
    match = re.fullmatch(r"L(\d)/(.+)", spec)
    root = kernelbench_root()
    if match is None or root is None:
        pytest.skip(f"task {spec} needs the KernelBench data")
    path = root / f"level{match.group(1)}" / f"{match.group(2)}.py"
    return load_task_file(path, source="kernelbench", level=int(match.group(1)), validate=False)


def materialise_folder(task: Task, folder: Path, dest: Path) -> Path:
    """A real workspace for ``task`` at ``dest`` holding ``folder``'s model_new.py and kernels/. An absolute symlink
    is kept as a link (an adversarial case's attack: the evaluator must meet the link itself); a relative one names
    a file shared with another case and is copied."""
    from cuda_agent.workspace import create_workspace

    ws = create_workspace(task, dest)
    for src in [folder / "model_new.py", *sorted((folder / "kernels").rglob("*"))]:
        if not (src.is_symlink() or src.is_file()):
            continue
        target = ws.root / src.relative_to(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        if src.is_symlink() and os.path.isabs(os.readlink(src)):
            os.symlink(os.readlink(src), target)
        else:
            shutil.copyfile(src, target)
    return ws.root


def _header(text: str) -> dict[str, str]:
    return dict(_HEADER.findall(text.splitlines()[0]))


FAILURE_STAGES = ("crashed", "timeout", "out_of_memory", "runtime_error")
# Rules that only timing can fire: their cases are profiled even though they are cheats.
TIMING_RULES = ("below_speed_of_light",)


def cpu_cases(failures: bool = False) -> list[Case]:
    """The CPU cases: cheats and honest candidates, or (``failures``) candidates that crash, hang or raise."""
    out = []
    for path in sorted((CASES / "cpu").glob("*.py")):
        head = _header(path.read_text())
        if (head["expect"] in FAILURE_STAGES) == failures:
            out.append(Case(path.stem, path, head["task"], head["mode"], head["expect"]))
    return out


def gpu_cases() -> list[Case]:
    out = []
    for folder in sorted(p for p in (CASES / "gpu").iterdir() if p.is_dir()):
        head = _header((folder / "CASE").read_text())
        out.append(Case(folder.name, folder, head["task"], head["mode"], head["expect"]))
    return out


