"""Benchmark results on disk: one JSON file holding the task list, the outcome of each task and the run's details.

The task list travels with the outcomes so that a report computed later (or on another machine, with no GPU) counts
missing tasks as failures exactly as the run did.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from cuda_agent.bench.outcome import TaskOutcome, best_per_task
from cuda_agent.errors import ConfigError

if TYPE_CHECKING:
    from cuda_agent.store import Store

RESULTS_SCHEMA = 1


@dataclass(frozen=True)
class BenchResults:
    """A benchmark's results.

    Attributes:
        name: what was benchmarked (a policy, a system, a folder of solutions).
        tasks: the task list, ``task id -> level``; metrics count tasks without an outcome as failures.
        outcomes: the best outcome of each task that produced one.
        meta: free-form details (GPU, date, command, settings).
    """

    name: str
    tasks: dict[str, int | None]
    outcomes: tuple[TaskOutcome, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, name: str, tasks: Mapping[str, int | None], outcomes: Iterable[TaskOutcome],
              meta: Mapping[str, Any] | None = None) -> "BenchResults":
        best = best_per_task(outcomes)
        ordered = tuple(best[t] for t in tasks if t in best) + tuple(o for t, o in best.items() if t not in tasks)
        return cls(name, dict(tasks), ordered, dict(meta or {}))

    @property
    def missing(self) -> list[str]:
        have = {o.task_id for o in self.outcomes}
        return [t for t in self.tasks if t not in have]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RESULTS_SCHEMA,
            "name": self.name,
            "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "meta": self.meta,
            "tasks": [{"task_id": t, "level": lv} for t, lv in self.tasks.items()],
            "outcomes": [o.to_dict() for o in self.outcomes],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BenchResults":
        if not isinstance(data, Mapping) or "outcomes" not in data:
            raise ConfigError("not a benchmark results file: no 'outcomes' list (write one with save_results)")
        outcomes = [TaskOutcome.from_dict(o) for o in data["outcomes"]]
        raw_tasks = data.get("tasks")
        if raw_tasks is None:
            tasks = {o.task_id: o.level for o in outcomes}
        else:
            try:
                tasks = {str(t["task_id"]): t.get("level") for t in raw_tasks}
            except (TypeError, KeyError) as exc:
                raise ConfigError(f"results file: malformed 'tasks' list ({exc}); expected task_id and level") from exc
        return cls(str(data.get("name", "")), tasks, tuple(outcomes), dict(data.get("meta") or {}))


def save_results(results: BenchResults, path: str | Path) -> Path:
    """Write results atomically (a temporary file, then a rename): a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(results.to_dict(), fh, indent=1)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_results(path: str | Path) -> BenchResults:
    """Read a results file; raise `ConfigError` naming the file when it is missing or malformed."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read results ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from exc
    try:
        return BenchResults.from_dict(data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def outcomes_from_store(store: "Store", run_id: str, levels: Mapping[str, int | None] | None = None) -> list[TaskOutcome]:
    """Outcomes of every finished evaluation stored for ``run_id`` (one per evaluation; see `best_per_task`)."""
    outcomes = []
    for record in store.records(run_id=run_id):
        if record.status != "done":
            continue
        tid = record.task_id or str(record.result.get("task_id", ""))
        outcomes.append(TaskOutcome.from_result(record.eval_result(), (levels or {}).get(tid), task_id=tid,
                                                solution=record.result.get("solution") or None))
    return outcomes
