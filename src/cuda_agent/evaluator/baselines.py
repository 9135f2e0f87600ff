"""Eager and ``torch.compile`` baseline times, measured once per task, GPU, library versions and settings.

Why: the published workspace spends 26-28 s of every profile call rebuilding ``torch.compile`` for the baseline.
The baselines of a task do not change while the candidate does, so they are measured once and kept on disk, one
JSON file per key. Writes are atomic (a temporary file in the same folder, then ``os.replace``), so a reader in
another process sees either nothing or a whole record; `BaselineCache.get_or_measure` also takes a file lock so
that two evaluations of the same task measure the baselines once, not twice.

Trust: only a trusted process writes here. The judge runs task code, so it sees this folder read-only (its sandbox
sets `MARKER_ENV`): there `put` hands the record back (`handed_back`) instead of writing, and the caller writes it
after checking it (`cuda_agent.evaluator.trusted.store_baselines`). The judge measures before any candidate code runs
in the evaluation and after its candidate process has ended (no candidate process can see this folder), and each
record carries the SHA-256 of its times, checked when it is read back: a record that changed is measured again.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from cuda_agent.errors import ConfigError
from cuda_agent.evaluator.stats import TimingStats

if TYPE_CHECKING:  # torch only where times are measured: the trusted caller writes records without it
    import torch

    from cuda_agent.evaluator.timing import TimingConfig

from cuda_agent.sandbox.task_code import MARKER_ENV  # noqa: E402

_HANDED_BACK: list[dict[str, Any]] = []

log = logging.getLogger(__name__)

_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
BASELINE_SCHEMA = 3  # 2: the compiled baseline's per-kernel breakdown; 3: a checksum of the times


@dataclass(frozen=True)
class BaselineTimes:
    """Eager and compiled times of one task's reference. ``compile_s``: seconds spent compiling and warming
    ``torch.compile`` (0 when read from cache); ``compile_error``: why the compiled baseline fell back to eager;
    ``compile_kernels``: the compiled model's kernels per call (name, total_us, calls), slowest first, when they
    were recorded (on a GPU)."""

    eager: TimingStats
    compile: TimingStats
    key: str
    compile_s: float = 0.0
    compile_error: str = ""
    compile_kernels: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "eager": self.eager.to_dict(),
            "compile": self.compile.to_dict(),
            "key": self.key,
            "compile_s": self.compile_s,
            "compile_error": self.compile_error,
            "compile_kernels": [dict(k) for k in self.compile_kernels],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BaselineTimes":
        return cls(
            eager=TimingStats.from_dict(dict(data["eager"])),
            compile=TimingStats.from_dict(dict(data["compile"])),
            key=str(data.get("key", "")),
            compile_s=float(data.get("compile_s", 0.0)),
            compile_error=str(data.get("compile_error", "")),
            compile_kernels=tuple(dict(k) for k in data.get("compile_kernels", ())),
        )


def baseline_key(task_hash: str, gpu_name: str, torch_version: str, cuda_version: str | None, settings: Mapping[str, Any]) -> str:
    """A file-name-safe key for one task's baselines on one GPU model, library versions and timing settings.

    Raises:
        ConfigError: ``settings`` holds a value that is not JSON (the key must be reproducible).
    """
    try:
        canon = json.dumps(
            {"schema": BASELINE_SCHEMA, "task": task_hash, "gpu": gpu_name, "torch": torch_version,
             "cuda": cuda_version, "settings": dict(settings)},
            sort_keys=True, separators=(",", ":"),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"baseline_key: settings must be plain JSON values (str, number, bool, list, dict): {exc}") from exc
    return hashlib.sha256(canon.encode()).hexdigest()[:40]


def environment_key_parts(device: "torch.device | None" = None) -> dict[str, str | None]:
    """The GPU name, torch version and CUDA version of this process, as `baseline_key` wants them."""
    import torch

    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(device)
    else:
        gpu = "cpu"
    return {"gpu_name": gpu, "torch_version": torch.__version__, "cuda_version": torch.version.cuda}


def default_cache_dir() -> Path:
    """``$CUDA_AGENT_CACHE/baselines``, else ``~/.cache/cuda-agent/baselines`` (the build cache's sibling)."""
    root = os.environ.get("CUDA_AGENT_CACHE")
    base = Path(root) if root else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cuda-agent"
    return base / "baselines"


class BaselineCache:
    """One JSON file per key under ``directory``; safe for many processes at once."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.dir = Path(directory) if directory is not None else default_cache_dir()

    def _path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ConfigError(f"baseline cache: bad key {key!r}; use baseline_key(...) to make one")
        return self.dir / f"{key}.json"

    def get(self, key: str) -> BaselineTimes | None:
        """The cached times for ``key``, or None if absent or unreadable (an unreadable file is logged and ignored)."""
        path = self._path(key)
        try:
            data = json.loads(path.read_text())
            if data.get("sha256") != _checksum(data["times"]):
                log.warning("baseline cache: %s does not match its checksum; measuring again", path)
                return None
            return BaselineTimes.from_dict(data["times"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("baseline cache: ignoring unreadable %s: %s", path, exc)
            return None

    def put(self, key: str, times: BaselineTimes, meta: Mapping[str, Any] | None = None) -> Path:
        """Write ``times`` atomically; ``meta`` (task, GPU, versions, settings: the key's parts) is stored beside
        them. Inside a task-code sandbox the record is handed back instead (see the module docstring)."""
        path = self._path(key)
        payload = times.to_dict()
        if os.environ.get(MARKER_ENV):
            _HANDED_BACK.append({"key": key, "times": payload, "meta": dict(meta or {})})
            return path
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {"schema": BASELINE_SCHEMA, "key": key, "written": time.time(), "meta": dict(meta or {}),
                  "times": payload, "sha256": _checksum(payload)}
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(record, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        if os.environ.get(MARKER_ENV):  # read-only here: two judges of one task may both measure
            yield
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / f".{key}.lock", "a+") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def get_or_measure(
        self, key: str, measure: Callable[[], BaselineTimes], meta: Mapping[str, Any] | None = None,
        *, refresh: bool = False,
    ) -> tuple[BaselineTimes, bool]:
        """Return ``(times, hit)``: cached times, or ``measure()`` stored under ``key``. Concurrent callers with the
        same key wait for the first one's measurement instead of measuring again. ``refresh`` measures and stores
        anew even when a record exists (the drift check found the cached times stale)."""
        cached = None if refresh else self.get(key)
        if cached is not None:
            return cached, True
        with self._locked(key):
            cached = None if refresh else self.get(key)
            if cached is not None:
                return cached, True
            times = measure()
            if times.key != key:
                times = replace(times, key=key)
            self.put(key, times, meta)
            return times, False


def handed_back() -> list[dict[str, Any]]:
    """The records `put` handed back in this process (inside a task-code sandbox), for the trusted caller."""
    return list(_HANDED_BACK)


def times_from_dict(data: Mapping[str, Any], key: str) -> BaselineTimes:
    """`BaselineTimes` from a handed-back record's times (the caller's checks come first)."""
    return replace(BaselineTimes.from_dict(data), key=key)


def _checksum(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def measure_baselines(
    model: "torch.nn.Module",
    input_sets: Sequence[Sequence[Any]],
    *,
    warmup: int = 5,
    reps: int = 50,
    key: str = "",
    config: "TimingConfig | None" = None,
    compile_mode: str | None = None,
    compile_backend: str = "inductor",
    breakdown: bool = False,
    timer: Callable[[Callable[..., Any], Sequence[Sequence[Any]]], TimingStats] | None = None,
) -> BaselineTimes:
    """Time ``model`` eagerly and compiled with ``torch.compile`` (default mode and the inductor backend unless
    ``compile_mode``/``compile_backend`` say otherwise; another backend is for tests and experiments only).

    The model is compiled once and warmed on every input set before timing, so compilation never lands in the
    measured times. If ``torch.compile`` fails, the compiled time is the eager time and ``compile_error`` says why
    (the reward then treats "beats compile" as "beats eager", which is what a user without a compiler would see).
    Errors from the eager model itself propagate. ``breakdown`` also records the compiled model's kernels on the
    first input set (GPU only; when recording fails, the times are kept and the breakdown is left empty).
    ``timer(fn, input_sets)`` times each (default: `time_forward` with ``warmup``, ``reps`` and ``config``; the
    judge passes `timing.time_batched`, the way it times candidates).
    """
    import torch

    if timer is None:
        from cuda_agent.evaluator.timing import time_forward

        def timer(fn: Callable[..., Any], sets: Sequence[Sequence[Any]]) -> TimingStats:
            return time_forward(fn, sets, warmup=warmup, reps=reps, config=config)
    eager = timer(model, input_sets)
    start = time.perf_counter()
    error = ""
    try:
        compiled = torch.compile(model, mode=compile_mode, backend=compile_backend)
        with torch.no_grad():
            for inputs in input_sets:
                compiled(*inputs)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        compile_s = time.perf_counter() - start
        compiled_stats = timer(compiled, input_sets)
    except Exception as exc:  # inductor can fail in many ways; the baseline must still exist
        compile_s = time.perf_counter() - start
        error = f"{type(exc).__name__}: {exc}"[:2000]
        log.warning("torch.compile baseline failed, using eager time instead: %s", error)
        compiled_stats = eager
    kernels: tuple[dict[str, Any], ...] = ()
    if breakdown and not error:
        kernels = _compiled_kernels(compiled, input_sets[0])
    return BaselineTimes(eager=eager, compile=compiled_stats, key=key, compile_s=compile_s, compile_error=error,
                         compile_kernels=kernels)


def _compiled_kernels(compiled: Callable[..., Any], inputs: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    from cuda_agent.evaluator.profile import breakdown_rows

    try:
        return breakdown_rows(compiled, inputs)
    except Exception as exc:  # noqa: BLE001 - the breakdown is for the agent's information only
        log.warning("compiled baseline: kernel breakdown unavailable: %s: %s", type(exc).__name__, exc)
        return ()
