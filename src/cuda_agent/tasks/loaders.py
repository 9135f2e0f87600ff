"""Load task sets: a KernelBench folder, the KernelBench dataset on the hub, CUDA-Agent-Ops-6K, or a user's files.

Every loader checks each task's syntax here and, with ``validate`` (the default), dry-runs it inside the sandbox
(`cuda_agent.tasks.sandboxed`: task code from files, rows or the hub is untrusted and never runs in this
process); bad ones are recorded as `LoadFailure`s instead of stopping, so one broken file never hides the other
249. Only code shipped in this package (``trusted=True``, the bundled example) is dry-run in-process.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Callable, Iterable

from cuda_agent.errors import TaskError
from cuda_agent.locations import kernelbench_root
from cuda_agent.tasks.hub import KERNELBENCH_HUB_ID, OPS6K_HUB_ID, download_splits, fetch_kernelbench, fetch_ops6k
from cuda_agent.tasks.sandboxed import validate_in_sandbox
from cuda_agent.tasks.task import Task
from cuda_agent.tasks.taskset import LoadFailure, TaskSet
from cuda_agent.tasks.validate import check_syntax, dry_run, guess_ops

log = logging.getLogger(__name__)

_LEVEL_DIR = re.compile(r"level_?(\d+)$", re.IGNORECASE)


def load_task_file(path: str | Path, *, source: str = "user", level: int | None = None, validate: bool = True,
                   trusted: bool = False) -> Task:
    """Load one task file; raise `TaskError` naming the file and the cause if it is not a usable task.

    ``validate``: dry-run it in the sandbox (``trusted``: in this process, for code shipped with cuda-agent only);
    without it only the syntax and the three required names are checked."""
    task = _parse_task_file(path, source=source, level=level)
    if validate and trusted:
        dry_run(task.code, str(path))
    elif validate:
        problem = validate_in_sandbox([(str(path), task.code)]).get(str(path))
        if problem is not None:
            raise TaskError(problem)
    return task


def _parse_task_file(path: str | Path, *, source: str, level: int | None) -> Task:
    """A task from a file, its syntax checked (nothing executed)."""
    path = Path(path)
    try:
        code = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                        "save it as UTF-8") from exc
    origin = str(path)
    check_syntax(code, origin)
    prefix = f"L{level}/" if level is not None else f"{source}/"
    return Task(
        id=prefix + path.stem,
        code=code,
        source=source,
        level=level,
        name=path.stem,
        ops=guess_ops(code),
        path=origin,
    )


def _collect(items: Iterable[tuple[str, Callable[[], Task]]], progress: Callable[[int], None] | None = None, *,
             validate: bool = False) -> TaskSet:
    """Make each task (``make`` parses, executes nothing), then, with ``validate``, dry-run them all in one
    sandbox; each failure becomes a `LoadFailure`, in the order of ``items``."""
    made: list[tuple[str, Task | None, str | None]] = []
    for origin, make in items:
        try:
            made.append((origin, make(), None))
        except TaskError as exc:
            made.append((origin, None, str(exc)))
        if progress is not None:
            progress(1)
    if validate:
        verdicts = validate_in_sandbox([(origin, task.code) for origin, task, _ in made if task is not None])
        made = [(origin, task, verdicts.get(origin)) if task is not None else (origin, task, problem)
                for origin, task, problem in made]
    tasks: list[Task] = []
    failures: list[LoadFailure] = []
    for origin, task, problem in made:
        if problem is not None or task is None:
            log.info("skipping bad task: %s", problem)
            failures.append(LoadFailure(origin, str(problem)))
        else:
            tasks.append(task)
    return TaskSet(tuple(tasks), tuple(failures))


def _task_number(path: Path) -> tuple[int, str]:
    head = path.stem.split("_", 1)[0]
    return (int(head) if head.isdigit() else 10**9, path.stem)


def load_kernelbench_dir(
    root: str | Path, levels: Iterable[int] | None = None, *, validate: bool = True
) -> TaskSet:
    """Load a KernelBench folder holding ``level1/``, ``level2/``, ``level3/`` (``level_1`` also accepted)."""
    root = Path(root)
    if not root.is_dir():
        raise TaskError(f"{root}: not a folder; point at a KernelBench checkout's task folder (with level1/ ...)")
    wanted = set(levels) if levels is not None else None
    items: list[tuple[str, Callable[[], Task]]] = []
    level_dirs = sorted(
        (int(m.group(1)), d) for d in root.iterdir() if d.is_dir() and (m := _LEVEL_DIR.search(d.name))
    )
    if not level_dirs:
        raise TaskError(f"{root}: no level1/, level2/ or level3/ folders found")
    for level, folder in level_dirs:
        if wanted is not None and level not in wanted:
            continue
        for path in sorted(folder.glob("*.py"), key=_task_number):
            items.append((str(path), lambda p=path, lv=level: _parse_task_file(p, source="kernelbench", level=lv)))
    return _collect(items, validate=validate)


def load_user_path(path: str | Path, *, validate: bool = True) -> TaskSet:
    """Load a user's task file, or every ``*.py`` in a folder (recursively)."""
    path = Path(path)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        if any(_LEVEL_DIR.search(d.name) for d in path.iterdir() if d.is_dir()):
            return load_kernelbench_dir(path, validate=validate)
        files = sorted(p for p in path.rglob("*.py") if not p.name.startswith("_"))
    else:
        raise TaskError(f"{path}: no such file or folder")
    return _collect(((str(p), lambda p=p: _parse_task_file(p, source="user", level=None)) for p in files),
                    validate=validate)


def _row_task(row: dict[str, Any], index: int, *, source: str, origin: str) -> Task:
    code = row.get("code")
    if not isinstance(code, str) or not code.strip():
        raise TaskError(f"{origin}: row {index} has no code")
    check_syntax(code, f"{origin}#{index}")
    ops = row.get("ops")
    if isinstance(ops, str):
        ops = [o.strip() for o in re.split(r"[,\s\[\]'\"]+", ops) if o.strip()]
    level = row.get("level")
    name = str(row.get("name") or f"{index:05d}")
    task_id = f"L{level}/{name}" if source == "kernelbench-hf" else f"{source}/{index:05d}"
    return Task(
        id=task_id,
        code=code,
        source=source,
        level=int(level) if level is not None else None,
        name=name,
        ops=tuple(ops) if ops is not None else guess_ops(code),
        path=None,
        metadata={k: v for k, v in row.items() if k not in {"code", "ops", "level", "name"} and _plain(v)},
    )


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def load_rows(rows: Iterable[dict[str, Any]], *, source: str, origin: str, validate: bool = True) -> TaskSet:
    """Build a task set from table rows with at least a ``code`` column (Ops-6K, the hub, our synthesis output)."""
    return _collect(((f"{origin}#{i}", lambda r=row, i=i: _row_task(r, i, source=source, origin=origin))
                     for i, row in enumerate(rows)), validate=validate)


def load_parquet(path: str | Path, *, source: str = "ops6k", validate: bool = True) -> TaskSet:
    """Load a parquet file with columns ``ops``, ``data_source``, ``code`` (CUDA-Agent-Ops-6K's layout)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise TaskError(f"{path}: no such parquet file")
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise TaskError(f"{path}: not a readable parquet file: {exc}") from exc
    if "code" not in table.column_names:
        raise TaskError(f"{path}: no 'code' column (columns: {', '.join(table.column_names)})")
    return load_rows(table.to_pylist(), source=source, origin=str(path), validate=validate)


def load_hub_dataset(repo_id: str, *, split: str | None = None, source: str, validate: bool = True) -> TaskSet:
    """Load a task set from the Hugging Face hub (needs the optional ``datasets`` package and network access)."""
    merged = TaskSet(())
    for split_name, rows in download_splits(repo_id, split).items():
        origin = repo_id if split else f"{repo_id}:{split_name}"
        merged = merged.merge(load_rows(rows, source=source, origin=origin, validate=validate))
    return merged


def load_tasks(spec: str, *, validate: bool = True) -> TaskSet:
    """Load a task set from a spec string, the one the CLI takes.

    - a folder with ``level1/`` ...: KernelBench; another folder or a ``.py`` file: the user's own tasks
    - a ``.parquet`` file: CUDA-Agent-Ops-6K layout
    - ``hub:kernelbench`` / ``hub:ops6k``: the hub's copy, fetched into the cache once (`cuda_agent.tasks.hub`);
      ``hub:<repo id>``: any hub dataset with a ``code`` column

    Raises `TaskError` for an empty spec (``Path("")`` is the current folder, which nobody names by leaving the
    spec out).
    """
    if not spec.strip():
        raise TaskError("the task spec is empty; name a task file or folder, a .parquet file or hub:<name>")
    if spec.startswith("hub:"):
        name = spec[4:]
        if name in {"kernelbench", KERNELBENCH_HUB_ID}:
            return load_kernelbench_dir(fetch_kernelbench().path, validate=validate)
        if name in {"ops6k", OPS6K_HUB_ID}:
            return load_parquet(fetch_ops6k().path, validate=validate)
        return load_hub_dataset(name, source="hub", validate=validate)
    path = Path(spec)
    if path.suffix == ".parquet":
        return load_parquet(path, validate=validate)
    return load_user_path(path, validate=validate)


def resolve_task(spec: str) -> Task:
    """One task from what a user types: a task file path, or a KernelBench id (``L1/19_ReLU``, ``level1/19_ReLU``,
    ``L1/19``) looked up in the KernelBench folder (see `cuda_agent.locations.kernelbench_root`).

    Only the syntax is checked here: the task is about to be evaluated, and the evaluator runs it in its own
    isolated process, which reports a task that fails as clearly as a dry run would."""
    path = Path(spec)
    if path.suffix == ".py" and path.is_file():
        return load_task_file(path, validate=False)
    match = re.fullmatch(r"(?:L|level_?)(\d)/(\d+)(?:_.*)?", spec.removesuffix(".py"), re.IGNORECASE)
    if not match:
        raise TaskError(f"{spec}: not a task file, nor a KernelBench id such as L1/19_ReLU")
    root = kernelbench_root()
    if root is None:
        raise TaskError(f"{spec}: no KernelBench folder found; set CUDA_AGENT_KERNELBENCH to a folder with level1/ "
                        "..., or download it with: cuda-agent data fetch kernelbench")
    level, number = int(match.group(1)), match.group(2)
    hits = sorted((root / f"level{level}").glob(f"{number}_*.py"))
    if not hits:
        raise TaskError(f"{spec}: no task {number} in {root / f'level{level}'}")
    return load_task_file(hits[0], source="kernelbench", level=level, validate=False)
