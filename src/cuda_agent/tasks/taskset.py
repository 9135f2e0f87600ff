"""`TaskSet`: an ordered collection of tasks, with the files that failed to load, filters and sampling."""
from __future__ import annotations

import fnmatch
import random
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

from cuda_agent.tasks.task import Task


@dataclass(frozen=True)
class LoadFailure:
    """A task file (or row) that could not be loaded, and why."""

    origin: str
    reason: str


@dataclass(frozen=True)
class TaskSet:
    """Tasks in a stable order, plus the failures met while loading them (loading never stops at a bad file)."""

    tasks: tuple[Task, ...]
    failures: tuple[LoadFailure, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, key: int | str) -> Task:
        if isinstance(key, int):
            return self.tasks[key]
        for task in self.tasks:
            if task.id == key or task.name == key:
                return task
        raise KeyError(f"no task with id or name {key!r} (have {len(self.tasks)} tasks)")

    def filter(
        self,
        levels: Iterable[int] | None = None,
        ids: Sequence[str] | None = None,
        ops: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
    ) -> "TaskSet":
        """Keep tasks matching every given criterion.

        ``ids`` are exact ids, names or shell patterns (``L1/1*``); ``ops`` keeps tasks using any of the operators
        (case-insensitive, matched against the task's ``ops``).
        """
        level_set = set(levels) if levels is not None else None
        op_set = {op.lower() for op in ops} if ops else None
        kept = []
        for task in self.tasks:
            if level_set is not None and task.level not in level_set:
                continue
            if sources and task.source not in sources:
                continue
            if ids and not any(
                fnmatch.fnmatchcase(task.id, pattern) or fnmatch.fnmatchcase(task.name, pattern) for pattern in ids
            ):
                continue
            if op_set is not None and not op_set.intersection(op.lower() for op in task.ops):
                continue
            kept.append(task)
        return TaskSet(tuple(kept), self.failures)

    def sample(self, n: int, seed: int = 0) -> "TaskSet":
        """``n`` tasks drawn without replacement, reproducibly for a seed, kept in the set's order."""
        if n >= len(self.tasks):
            return self
        picked = set(random.Random(seed).sample(range(len(self.tasks)), n))
        return TaskSet(tuple(t for i, t in enumerate(self.tasks) if i in picked), self.failures)

    def merge(self, other: "TaskSet") -> "TaskSet":
        return TaskSet(self.tasks + other.tasks, self.failures + other.failures)
