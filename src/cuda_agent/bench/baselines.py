"""Eager and torch.compile baseline times of a task set on the current GPU, kept as one JSON table, with import and
export of KernelBench's baseline-time files.

KernelBench's layout (``results/timing/<gpu>/baseline_time_torch.json`` for eager and
``baseline_time_torch_compile_inductor_default.json`` for torch.compile): ``{"level1": {"19_ReLU.py": {"mean",
"std", "min", "max", "num_trials", "hardware", "device"}}}``, times in milliseconds.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from cuda_agent.errors import ConfigError
from cuda_agent.tasks import Task

log = logging.getLogger(__name__)

BASELINE_SCHEMA = 1
_STAT_KEYS = ("mean", "std", "min", "max", "num_trials")
_LEVEL_KEY = re.compile(r"^level_?(\d+)$")


@dataclass(frozen=True)
class Stats:
    """Per-call times in milliseconds (KernelBench's fields, plus the median where we measured it)."""

    mean: float
    std: float
    min: float
    max: float
    num_trials: int
    median: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mean": self.mean, "std": self.std, "min": self.min, "max": self.max,
                               "num_trials": self.num_trials}
        if self.median is not None:
            out["median"] = self.median
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> "Stats":
        try:
            return cls(float(data["mean"]), float(data.get("std", 0.0)), float(data.get("min", data["mean"])),
                       float(data.get("max", data["mean"])), int(data.get("num_trials", 0)),
                       None if data.get("median") is None else float(data["median"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: malformed timing stats ({exc}); expected mean, std, min, max, num_trials") \
                from exc

    @classmethod
    def from_timing(cls, stats: Any) -> "Stats":
        """From the evaluator's `TimingStats`."""
        return cls(stats.mean_ms, stats.std_ms, stats.min_ms, stats.max_ms, int(stats.n), stats.median_ms)


@dataclass(frozen=True)
class BaselineEntry:
    """One task's baselines. ``file`` is the task's file name in KernelBench (``19_ReLU.py``)."""

    task_id: str
    level: int | None
    file: str
    eager: Stats | None = None
    compile: Stats | None = None
    compile_error: str = ""


@dataclass(frozen=True)
class BaselineTable:
    """Baselines of a task set on one GPU."""

    hardware: str
    entries: dict[str, BaselineEntry] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": BASELINE_SCHEMA,
            "hardware": self.hardware,
            "meta": self.meta,
            "tasks": [
                {"task_id": e.task_id, "level": e.level, "file": e.file,
                 "eager": e.eager.to_dict() if e.eager else None,
                 "compile": e.compile.to_dict() if e.compile else None, "compile_error": e.compile_error}
                for e in self.entries.values()
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BaselineTable":
        if "tasks" not in data:
            raise ConfigError("not a cuda-agent baseline table (no 'tasks'); for KernelBench files use --import")
        entries = {}
        for item in data["tasks"]:
            tid = str(item["task_id"])
            entries[tid] = BaselineEntry(
                tid, item.get("level"), str(item.get("file", "")),
                Stats.from_dict(item["eager"], tid) if item.get("eager") else None,
                Stats.from_dict(item["compile"], tid) if item.get("compile") else None,
                str(item.get("compile_error", "")),
            )
        return cls(str(data.get("hardware", "")), entries, dict(data.get("meta") or {}))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "BaselineTable":
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read baseline table: {exc}") from exc

    def to_kernelbench(self, which: str) -> dict[str, dict[str, dict[str, Any]]]:
        """KernelBench's nested layout for ``which`` = ``eager`` or ``compile``; tasks without a level or without
        that time are left out."""
        if which not in ("eager", "compile"):
            raise ConfigError(f"which must be 'eager' or 'compile', got {which!r}")
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for entry in self.entries.values():
            stats = getattr(entry, which)
            if stats is None or entry.level is None:
                continue
            record = {k: v for k, v in stats.to_dict().items() if k in _STAT_KEYS}
            out.setdefault(f"level{entry.level}", {})[entry.file] = {**record, "hardware": self.hardware,
                                                                     "device": "cuda:0"}
        return out

    def export_kernelbench(self, folder: str | Path) -> tuple[Path, Path]:
        """Write ``baseline_time_torch.json`` and ``baseline_time_torch_compile_inductor_default.json`` in
        ``folder`` (KernelBench's ``results/timing/<gpu>/``)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        eager = folder / "baseline_time_torch.json"
        compiled = folder / "baseline_time_torch_compile_inductor_default.json"
        eager.write_text(json.dumps(self.to_kernelbench("eager"), indent=4) + "\n")
        compiled.write_text(json.dumps(self.to_kernelbench("compile"), indent=4) + "\n")
        return eager, compiled


def _read_kernelbench(path: Path) -> dict[tuple[int, str], tuple[Stats, str]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read KernelBench timing file: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected an object of levels (level1, level2, ...)")
    out: dict[tuple[int, str], tuple[Stats, str]] = {}
    for level_key, problems in data.items():
        m = _LEVEL_KEY.match(str(level_key))
        if not m or not isinstance(problems, Mapping):
            raise ConfigError(f"{path}: unexpected key {level_key!r}; expected level1, level2, ...")
        for file, stats in problems.items():
            out[(int(m.group(1)), str(file))] = (Stats.from_dict(stats, f"{path}:{level_key}/{file}"),
                                                 str(stats.get("hardware", "")))
    return out


def import_kernelbench(eager_json: str | Path, compile_json: str | Path | None = None) -> BaselineTable:
    """Read KernelBench baseline-time files (eager, and optionally torch.compile) into a table; task ids are
    ``L<level>/<file stem>``, as `load_kernelbench_dir` names them."""
    eager = _read_kernelbench(Path(eager_json))
    compiled = _read_kernelbench(Path(compile_json)) if compile_json else {}
    entries: dict[str, BaselineEntry] = {}
    hardware = ""
    for level, file in sorted(set(eager) | set(compiled), key=lambda k: (k[0], _number(k[1]), k[1])):
        tid = f"L{level}/{Path(file).stem}"
        e, c = eager.get((level, file)), compiled.get((level, file))
        hardware = hardware or (e or c)[1]
        entries[tid] = BaselineEntry(tid, level, file, e[0] if e else None, c[0] if c else None)
    return BaselineTable(hardware, entries, {"imported_from": [str(eager_json), str(compile_json or "")]})


def _number(file: str) -> int:
    head = file.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**9


def task_file(task: Task) -> str:
    return Path(task.path).name if task.path else f"{task.name or task.id.rsplit('/', 1)[-1]}.py"


MEASURE_TIMEOUT_S = 1800.0


def measure_task(task: Task, *, warmup: int = 5, reps: int = 50, seed: int = 0, device: str = "cuda",
                 timeout_s: float = MEASURE_TIMEOUT_S) -> BaselineEntry:
    """Time one task's reference eagerly and under ``torch.compile`` (default mode) on ``device`` (the current GPU),
    with the evaluator's timer (device events, L2 flushed between iterations).

    The task's code runs in a task-code sandbox (`cuda_agent.sandbox.task_code`: no host file, secret or network),
    never in this process; its answer is checked (finite, non-negative times). Raises RuntimeError naming the
    task's own error, a time-out or a malformed answer; SandboxError when no sandbox can be made here."""
    import subprocess

    from cuda_agent.sandbox.task_code import TaskCodeSpec, python_argv, spawn_task_code

    request = {"task": task.to_dict(), "warmup": warmup, "reps": reps, "seed": seed, "device": device}
    proc = spawn_task_code(TaskCodeSpec(gpu=device != "cpu"), python_argv("cuda_agent.bench.baselines"),
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{task.id}: measuring its baselines ran past {timeout_s:g} s") from exc
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"{task.id}: no answer from the sandbox ({err.decode(errors='replace')[-500:]})") from None
    if not isinstance(answer, dict) or "error" in answer:
        raise RuntimeError(str(answer.get("error") if isinstance(answer, dict) else answer)[:500])
    eager, compiled = Stats.from_dict(answer["eager"], task.id), Stats.from_dict(answer["compile"], task.id)
    for stats in (eager, compiled):
        values = (stats.mean, stats.std, stats.min, stats.max, stats.median or 0.0)
        if not all(math.isfinite(v) and v >= 0 for v in values) or not stats.mean > 0:
            raise RuntimeError(f"{task.id}: the sandbox answered times that are not finite and positive")
    return BaselineEntry(task.id, task.level, task_file(task), eager, compiled, str(answer.get("compile_error", ""))[:2000])


def _measure_here(request: dict[str, Any]) -> dict[str, Any]:
    """In the sandbox: the measurement `measure_task` asked for."""
    import torch

    from cuda_agent.evaluator.baselines import measure_baselines
    from cuda_agent.evaluator.judge.reference import build_model, load_task_module, make_inputs

    task = Task.from_dict(request["task"])
    device = torch.device(request["device"])
    module = load_task_module(task.code, task.path or task.id)
    model = build_model(module, int(request["seed"]), device)
    inputs = [make_inputs(module, int(request["seed"]) + 1, device)]
    times = measure_baselines(model, inputs, warmup=int(request["warmup"]), reps=int(request["reps"]))
    return {"eager": Stats.from_timing(times.eager).to_dict(), "compile": Stats.from_timing(times.compile).to_dict(),
            "compile_error": times.compile_error}


def measure_tasks(tasks: Iterable[Task], *, existing: BaselineTable | None = None, save_to: str | Path | None = None,
                  warmup: int = 5, reps: int = 50,
                  progress: Callable[[Task, BaselineEntry | None, str], None] | None = None) -> BaselineTable:
    """Measure every task not already in ``existing`` (resumable: the table is saved after each task when
    ``save_to`` is given). A task that fails is logged, reported through ``progress`` and left out."""
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("measuring baselines needs a CUDA GPU; import KernelBench's files with --import instead")
    hardware = torch.cuda.get_device_name()
    table = existing if existing is not None and existing.hardware in ("", hardware) else BaselineTable(hardware)
    entries = dict(table.entries)
    for task in tasks:
        if task.id in entries and entries[task.id].eager is not None:
            continue
        try:
            entry: BaselineEntry | None = measure_task(task, warmup=warmup, reps=reps)
            error = ""
        except Exception as exc:  # a task that cannot run must not stop the other 249
            entry, error = None, f"{type(exc).__name__}: {exc}"[:500]
            log.warning("baseline of %s failed: %s", task.id, error)
        finally:
            torch.cuda.empty_cache()
        if entry is not None:
            entries[task.id] = entry
            table = BaselineTable(hardware, entries, {**table.meta, "torch": torch.__version__})
            if save_to is not None:
                table.save(save_to)
        if progress is not None:
            progress(task, entry, error)
    return BaselineTable(hardware, entries, {**table.meta, "torch": torch.__version__})


def _main() -> None:
    """``python -m cuda_agent.bench.baselines``: one request on stdin, one JSON line on a private copy of stdout
    (the task's own prints go to stderr)."""
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        answer = _measure_here(json.loads(sys.stdin.read()))
    except BaseException as exc:  # noqa: BLE001 - the task's failure is the answer
        answer = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    os.write(answer_fd, (json.dumps(answer) + "\n").encode())


if __name__ == "__main__":
    _main()
