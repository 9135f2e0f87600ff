"""`EvalJob`: one evaluation to run, with a snapshot of the solution taken when it is made.

The snapshot is the point: the agent keeps editing its workspace while the job waits in a queue, and the
evaluation must see the files as they were when it was submitted, not as they are when a GPU frees up.
"""
from __future__ import annotations

import base64
import math
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from cuda_agent.errors import ConfigError, WorkspaceError
from cuda_agent.evaluator.config import KINDS
from cuda_agent.pool.validation import CONTROL
from cuda_agent.store.keys import files_digest
from cuda_agent.tasks.task import Task
from cuda_agent.workspace import Workspace, create_workspace

if TYPE_CHECKING:
    from cuda_agent.workspace import Workspace

JOB_KINDS = KINDS
SOLUTION_KINDS = ("workspace", "file")
MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
SINGLE_FILE_NAME = "solution.py"


MAX_JOB_TIMEOUT_S = 24 * 3600.0


def positive_seconds(value: Any, name: str, limit: float = MAX_JOB_TIMEOUT_S) -> float:
    """``value`` as seconds: a finite number in (0, limit]. Raises `ConfigError` naming ``name`` otherwise (NaN
    passes ``value > 0`` checks written the other way round, and a NaN or infinite deadline breaks a waiting
    thread)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number of seconds, got {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or not 0 < seconds <= limit:
        raise ConfigError(f"{name} must be finite, positive and at most {limit:g} s, got {value}")
    return seconds


def new_job_id() -> str:
    return uuid.uuid4().hex


def workspace_root(workspace: "str | Path | Workspace") -> Path:
    """The folder of a workspace given as a path or a `Workspace`."""
    if isinstance(workspace, (str, Path)):
        return Path(workspace)
    return Path(workspace.root)


def _agent_files(root: Path) -> dict[str, bytes]:
    """model_new.py and kernels/** of a bare solution folder (an agent's files without the workspace around them)."""
    files = {"model_new.py": (root / "model_new.py").read_bytes()}
    kernels = root / "kernels"
    if kernels.is_dir():
        for path in sorted(kernels.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


@dataclass(frozen=True)
class SolutionSnapshot:
    """The solution's files, copied at submit time.

    Attributes:
        kind: ``workspace`` (the agent's files of a workspace: model_new.py and kernels/...; the protected files are
            rebuilt from the task when the snapshot is materialised, never taken from the agent's folder) or
            ``file`` (a KernelBench single-file solution, stored as ``solution.py``).
        files: (relative path, content) pairs, sorted by path.
    """

    kind: str
    files: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        if self.kind not in SOLUTION_KINDS:
            raise ConfigError(f"solution kind must be one of {SOLUTION_KINDS}, got {self.kind!r}")
        for rel, _ in self.files:
            parts = Path(rel).parts
            if not rel or Path(rel).is_absolute() or ".." in parts:
                raise ConfigError(f"solution file path {rel!r} must be relative and stay inside the solution")
            if CONTROL.search(rel):
                raise ConfigError(f"solution file path {rel!r} contains a control character; file names must be "
                                  "printable")
        total = sum(len(content) for _, content in self.files)
        if total > MAX_SNAPSHOT_BYTES:
            raise ConfigError(f"solution is {total} bytes; the limit is {MAX_SNAPSHOT_BYTES} (remove build outputs)")

    @classmethod
    def from_files(cls, files: Mapping[str, bytes | str], kind: str = "workspace") -> "SolutionSnapshot":
        items = tuple(sorted((rel, c.encode() if isinstance(c, str) else bytes(c)) for rel, c in files.items()))
        return cls(kind, items)

    @classmethod
    def from_path(cls, path: str | Path) -> "SolutionSnapshot":
        """Snapshot a workspace folder (its agent files), a bare solution folder (model_new.py and kernels/), or a
        single-file ``.py`` solution.

        Raises `WorkspaceError` if the path is neither.
        """
        path = Path(path)
        if path.is_file():
            if path.suffix != ".py":
                raise WorkspaceError(f"{path}: a single-file solution must be a .py file")
            return cls("file", ((SINGLE_FILE_NAME, path.read_bytes()),))
        if path.is_dir():
            if (path / ".cuda_agent").is_dir():
                return cls.from_files(Workspace.open(path).solution_files(), "workspace")
            if (path / "model_new.py").is_file():
                return cls.from_files(_agent_files(path), "workspace")
        raise WorkspaceError(f"{path}: no such solution (give a workspace folder, a folder with model_new.py and "
                             "kernels/, or a single-file .py)")

    def file_map(self) -> dict[str, bytes]:
        return dict(self.files)

    def digest(self) -> str:
        """Content hash of the files (what the cache keys on)."""
        return files_digest(self.file_map())

    def materialize(self, task: Task, root: Path) -> Path:
        """Write the solution under ``root`` (an empty folder) and return what `evaluate` takes: the workspace
        folder (protected files rebuilt from ``task``) or the single file."""
        root.mkdir(parents=True, exist_ok=True)
        if self.kind == "file":
            target = root / SINGLE_FILE_NAME
            target.write_bytes(self.files[0][1])
            return target
        workspace = create_workspace(task, root / "ws", solution=self.file_map())
        return workspace.root

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "files": {rel: base64.b64encode(content).decode() for rel, content in self.files},
            "encoding": "base64",
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SolutionSnapshot":
        """Read ``{"kind", "files": {path: content}}``; contents are base64 when ``encoding`` is ``base64``, else
        text. Raises `ConfigError` on a malformed object."""
        try:
            files = data["files"]
            encoding = data.get("encoding", "text")
            if not isinstance(files, Mapping) or encoding not in ("base64", "text"):
                raise TypeError("files must be an object and encoding 'base64' or 'text'")
            decoded = {
                str(rel): base64.b64decode(content, validate=True) if encoding == "base64" else str(content).encode()
                for rel, content in files.items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"malformed solution object ({exc}); expected {{'kind', 'files', 'encoding'}}") from exc
        return cls.from_files(decoded, str(data.get("kind", "workspace")))


@dataclass(frozen=True)
class EvalJob:
    """One evaluation for a pool.

    Attributes:
        task: the reference task.
        solution: the solution's files as they were at submit time.
        config: an `EvalConfig` (None: the evaluator's defaults); the job's ``kind`` overrides its profiling flags.
        kind: ``verify`` (correctness only), ``profile`` (correctness and timing: the agent's profile command) or
            ``full`` (correctness and timing: what the reward uses); `EvalConfig.for_kind` applies it. A per-kernel
            breakdown is made only when the config asks for one.
        job_id: unique id (a random hex string unless given).
        run_id: the run this job belongs to, if any (see `run_jobs`).
        force: evaluate even when the store holds a result for the same cache key.
        timeout_s: the pool's outer limit for this job (None: the config's limit plus a grace period).
    """

    task: Task
    solution: SolutionSnapshot
    config: Any = None
    kind: str = "full"
    job_id: str = field(default_factory=new_job_id)
    run_id: str | None = None
    force: bool = False
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in JOB_KINDS:
            raise ConfigError(f"job kind must be one of {JOB_KINDS}, got {self.kind!r}")
        if self.timeout_s is not None:
            positive_seconds(self.timeout_s, "job timeout_s")

    @classmethod
    def create(cls, task: Task, solution: str | Path | SolutionSnapshot | Mapping[str, bytes | str], config: Any = None,
               kind: str = "full", **kwargs: Any) -> "EvalJob":
        """Make a job, snapshotting ``solution`` now (a workspace folder, a ``.py`` file, a file mapping, or an
        existing snapshot)."""
        if isinstance(solution, SolutionSnapshot):
            snapshot = solution
        elif isinstance(solution, Mapping):
            snapshot = SolutionSnapshot.from_files(solution)
        else:
            snapshot = SolutionSnapshot.from_path(solution)
        return cls(task, snapshot, config, kind, **kwargs)

    def config_dict(self) -> dict[str, Any]:
        if self.config is None:
            return {}
        if isinstance(self.config, Mapping):
            return dict(self.config)
        return dict(self.config.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "kind": self.kind,
            "task": self.task.to_dict(),
            "solution": self.solution.to_dict(),
            "config": self.config_dict() if self.config is not None else None,
            "run_id": self.run_id,
            "force": self.force,
            "timeout_s": self.timeout_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EvalJob":
        """Rebuild a job; ``config`` stays a plain mapping (the worker turns it into an `EvalConfig`).
        Raises `ConfigError` on a malformed object."""
        try:
            task = Task.from_dict(dict(data["task"]))
            solution = SolutionSnapshot.from_dict(data["solution"])
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"malformed job object: missing or bad {exc}; expected task and solution") from exc
        config = data.get("config")
        return cls(
            task=task,
            solution=solution,
            config=dict(config) if config is not None else None,
            kind=str(data.get("kind", "full")),
            job_id=str(data.get("job_id") or new_job_id()),
            run_id=data.get("run_id"),
            force=bool(data.get("force", False)),
            timeout_s=data.get("timeout_s"),
        )
