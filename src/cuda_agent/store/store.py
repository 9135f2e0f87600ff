"""`Store`: every evaluation, resumable runs and agent trajectories in one SQL database (SQLite by default).

Why SQLite: embedded, nothing to start, and with WAL journaling many readers and one writer at a time across
processes. Each write is its own committed transaction, so a process killed mid-run loses nothing it had finished.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from cuda_agent.errors import StoreError
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.store.diagnose import StoreHealth, check_sqlite, classify
from cuda_agent.store.schema import DIALECTS, MIGRATIONS, SQLITE, Dialect, current_version, migrate
from cuda_agent.store.url import StoreURL, load_driver, parse_store_url

log = logging.getLogger(__name__)

DONE = "done"
ERROR = "error"


def default_store_url() -> str:
    """``sqlite:///`` + ``~/.cache/cuda-agent/store.db``: where the CLI keeps results unless told otherwise."""
    return "sqlite:///" + str(Path.home() / ".cache" / "cuda-agent" / "store.db")


@dataclass(frozen=True)
class EvalRecord:
    """One stored evaluation. ``status`` is ``done`` (the evaluator produced a result, whatever its verdict) or
    ``error`` (the infrastructure failed: a crashed worker, a timeout); only ``done`` records serve the cache."""

    id: int
    cache_key: str
    job_id: str
    run_id: str | None
    task_id: str
    kind: str
    gpu: str
    status: str
    result: dict[str, Any]
    created_at: float

    def eval_result(self) -> EvalResult:
        """The stored result as the evaluator's `EvalResult` (the one verdict type every reader gets)."""
        return EvalResult.from_dict(self.result)


@dataclass(frozen=True)
class RunJob:
    """A job registered in a run: its id, position, cache key and its serialised form (to resubmit it)."""

    job_id: str
    position: int
    cache_key: str
    job: dict[str, Any]


@dataclass(frozen=True)
class RunProgress:
    """Where a run stands: ``finished`` job ids (a ``done`` evaluation stored for this run) and the jobs left."""

    run_id: str
    total: int
    finished: frozenset[str]
    pending: tuple[RunJob, ...] = field(default=())

    @property
    def complete(self) -> bool:
        return not self.pending


def _as_dict(result: Any) -> dict[str, Any]:
    if isinstance(result, Mapping):
        return dict(result)
    to_dict = getattr(result, "to_dict", None)
    if to_dict is None:
        raise StoreError(f"cannot store a {type(result).__name__}: it has no to_dict(); pass an EvalResult or a dict")
    return dict(to_dict())


class Store:
    """Evaluations, runs and trajectories. Thread-safe (one connection behind a lock); process-safe through
    SQLite's WAL and immediate write transactions (or the server database's own locking).

    Open with `Store.open(url)`; close with `close()` or a ``with`` block.
    """

    def __init__(self, url: StoreURL, connection: Any, dialect: Dialect, busy_timeout_s: float) -> None:
        self.url = url
        self._conn = connection
        self._dialect = dialect
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._closed = False
        self._inode = _inode(url.path) if url.is_sqlite and url.path is not None else None

    @classmethod
    def open(
        cls,
        url: str | Path | None = None,
        *,
        busy_timeout_s: float = 60.0,
        migrations: Sequence[tuple[int, str, Sequence[str]]] = MIGRATIONS,
    ) -> "Store":
        """Open (creating and migrating if needed) the store at ``url`` (default: `default_store_url()`).

        Raises `ConfigError` for a malformed URL and `StoreError` when the database cannot be opened, its driver
        is missing, or its schema is newer than this cuda-agent: `StoreCorruptError` (not a database, damaged),
        `StorePermissionError` or `StoreMissingError` (the folder cannot be made) when that is the cause.
        """
        parsed = parse_store_url(url or default_store_url())
        if parsed.is_sqlite:
            conn = _connect_sqlite(parsed, busy_timeout_s)
            store = cls(parsed, conn, SQLITE, busy_timeout_s)
        else:
            driver = load_driver(parsed)
            conn = _connect_server(driver, parsed)
            store = cls(parsed, conn, DIALECTS[parsed.scheme], busy_timeout_s)
        try:
            store._write(lambda ex: migrate(ex, store._dialect, migrations))
        except BaseException:
            store.close()
            raise
        log.debug("opened store %s (schema %d)", parsed.redacted(), store.schema_version)
        return store

    # ---- plumbing -----------------------------------------------------------------------------------------------

    def _execute(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cursor = self._conn.cursor()
        try:
            cursor.execute(self._dialect.sql(statement), tuple(params))
            return list(cursor.fetchall()) if cursor.description else []
        finally:
            cursor.close()

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            self._check_open()
            try:
                rows = self._execute(statement, params)
            except sqlite3.Error as exc:
                raise classify(exc, self.url.redacted(), "a read", self.url.path) from exc
            if self._dialect is not SQLITE:
                self._conn.commit()
            return rows

    def _write(self, body: Callable[[Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]], Any]) -> Any:
        """Run ``body(execute)`` in one write transaction, retrying while another process holds the write lock."""
        deadline = time.monotonic() + self._busy_timeout_s
        delay = 0.01
        with self._lock:
            self._check_open()
            while True:
                try:
                    if self._dialect is SQLITE:
                        self._conn.execute("BEGIN IMMEDIATE")
                    try:
                        value = body(self._execute)
                        self._conn.commit()
                        return value
                    except BaseException:
                        self._conn.rollback()
                        raise
                except sqlite3.Error as exc:
                    busy = isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))
                    if busy and time.monotonic() > deadline:
                        raise StoreError(f"store {self.url.redacted()}: write failed: another process held the "
                                         f"write lock for {self._busy_timeout_s:.0f} s ({exc})") from exc
                    if not busy:
                        raise classify(exc, self.url.redacted(), "a write", self.url.path) from exc
                    time.sleep(delay)
                    delay = min(delay * 2, 0.5)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.url.redacted()} is closed; open it again with Store.open(url)")

    @property
    def schema_version(self) -> int:
        with self._lock:
            return current_version(self._execute)

    def check(self, *, deep: bool = True) -> StoreHealth:
        """Whether the store is usable now, looked at from outside this connection (whose cache can hide a file
        truncated, overwritten or removed while open): see `cuda_agent.store.diagnose.check_sqlite`; ``deep``
        adds SQLite's quick integrity check, which reads the whole file. Never raises; a server database is
        asked ``SELECT 1``."""
        where = self.url.redacted()
        if self._closed:
            return StoreHealth(where, False, "unavailable", "the store is closed")
        if self.url.is_sqlite and self.url.path is not None:
            return check_sqlite(where, self.url.path, self._inode, deep=deep)
        try:
            self._read("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - every driver has its own error root
            return StoreHealth(where, False, "unavailable", f"the database does not answer: {exc}")
        return StoreHealth(where, True)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- evaluations --------------------------------------------------------------------------------------------

    def put(
        self,
        key: str,
        result: EvalResult | Mapping[str, Any],
        *,
        job_id: str = "",
        run_id: str | None = None,
        task_id: str = "",
        kind: str = "",
        gpu: str = "",
        status: str = DONE,
    ) -> int:
        """Store one evaluation (committed before returning) and return its row id. ``result`` is an EvalResult
        (anything with ``to_dict()``) or a dict. Raises `StoreError` if it cannot be written."""
        if status not in (DONE, ERROR):
            raise StoreError(f"status must be {DONE!r} or {ERROR!r}, got {status!r}")
        payload = json.dumps(_as_dict(result), default=str)

        def body(ex: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]) -> int:
            ex(
                "INSERT INTO evaluations (cache_key, job_id, run_id, task_id, kind, gpu, status, result, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, job_id, run_id, task_id, kind, gpu, status, payload, time.time()),
            )
            rows = ex("SELECT MAX(id) FROM evaluations WHERE job_id = ? AND cache_key = ?", (job_id, key))
            return int(rows[0][0])

        return self._write(body)

    def get_record(self, key: str) -> EvalRecord | None:
        """The latest ``done`` evaluation with this cache key, or None."""
        rows = self._read(_SELECT + " WHERE cache_key = ? AND status = ? ORDER BY id DESC LIMIT 1", (key, DONE))
        return _record(rows[0]) if rows else None

    def get(self, key: str) -> Any | None:
        """The cached `EvalResult` for this key (latest ``done`` evaluation), or None."""
        record = self.get_record(key)
        return record.eval_result() if record else None

    def record_for_job(self, job_id: str) -> EvalRecord | None:
        """The latest stored evaluation of a job id (done or error), or None."""
        rows = self._read(_SELECT + " WHERE job_id = ? ORDER BY id DESC LIMIT 1", (job_id,))
        return _record(rows[0]) if rows else None

    def records(self, *, run_id: str | None = None, limit: int | None = None) -> list[EvalRecord]:
        """Stored evaluations in insertion order, optionally of one run."""
        query, params = _SELECT, []
        if run_id is not None:
            query += " WHERE run_id = ?"
            params.append(run_id)
        query += " ORDER BY id"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return [_record(row) for row in self._read(query, params)]

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self._read("SELECT COUNT(*) FROM evaluations")[0][0])
        return int(self._read("SELECT COUNT(*) FROM evaluations WHERE status = ?", (status,))[0][0])

    # ---- runs ---------------------------------------------------------------------------------------------------

    def begin_run(self, run_id: str, jobs: Sequence[RunJob], meta: Mapping[str, Any] | None = None) -> None:
        """Register a run and its jobs; calling it again for the same run adds only jobs not yet registered, so a
        resumed run keeps its original job list. Raises `StoreError` if a job id is registered with another key."""

        def body(ex: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]) -> None:
            if not ex("SELECT run_id FROM runs WHERE run_id = ?", (run_id,)):
                ex("INSERT INTO runs (run_id, meta, created_at) VALUES (?, ?, ?)",
                   (run_id, json.dumps(dict(meta or {}), default=str), time.time()))
            known = {row[0]: row[1] for row in ex("SELECT job_id, cache_key FROM run_jobs WHERE run_id = ?", (run_id,))}
            for job in jobs:
                if job.job_id in known:
                    if known[job.job_id] != job.cache_key:
                        raise StoreError(
                            f"run {run_id}: job {job.job_id} was registered with other content; "
                            "give changed jobs new ids or start a new run"
                        )
                    continue
                ex("INSERT INTO run_jobs (run_id, job_id, position, cache_key, job) VALUES (?, ?, ?, ?, ?)",
                   (run_id, job.job_id, job.position, job.cache_key, json.dumps(job.job, default=str)))

        self._write(body)

    def run_jobs(self, run_id: str) -> list[RunJob]:
        rows = self._read(
            "SELECT job_id, position, cache_key, job FROM run_jobs WHERE run_id = ? ORDER BY position, job_id",
            (run_id,),
        )
        return [RunJob(r[0], int(r[1]), r[2], json.loads(r[3])) for r in rows]

    def run_progress(self, run_id: str) -> RunProgress:
        """Which of a run's jobs have a ``done`` evaluation stored for this run, and which are left."""
        jobs = self.run_jobs(run_id)
        finished = frozenset(
            row[0] for row in self._read(
                "SELECT DISTINCT job_id FROM evaluations WHERE run_id = ? AND status = ?", (run_id, DONE)
            )
        )
        pending = tuple(job for job in jobs if job.job_id not in finished)
        return RunProgress(run_id, len(jobs), finished & {j.job_id for j in jobs}, pending)

    def runs(self) -> list[str]:
        return [row[0] for row in self._read("SELECT run_id FROM runs ORDER BY created_at")]

    # ---- trajectories -------------------------------------------------------------------------------------------

    def put_trajectory(self, episode_id: str, data: Mapping[str, Any] | Any, *, run_id: str | None = None) -> None:
        """Insert or replace an episode's trajectory (a JSON-serialisable mapping, or an object with to_dict())."""
        payload = json.dumps(_as_dict(data), default=str)
        now = time.time()

        def body(ex: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]) -> None:
            if ex("SELECT episode_id FROM trajectories WHERE episode_id = ?", (episode_id,)):
                ex("UPDATE trajectories SET data = ?, run_id = ?, updated_at = ? WHERE episode_id = ?",
                   (payload, run_id, now, episode_id))
            else:
                ex("INSERT INTO trajectories (episode_id, run_id, data, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                   (episode_id, run_id, payload, now, now))

        self._write(body)

    def get_trajectory(self, episode_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT data FROM trajectories WHERE episode_id = ?", (episode_id,))
        return json.loads(rows[0][0]) if rows else None

    def trajectory_ids(self, *, run_id: str | None = None) -> list[str]:
        if run_id is None:
            rows = self._read("SELECT episode_id FROM trajectories ORDER BY created_at, episode_id")
        else:
            rows = self._read(
                "SELECT episode_id FROM trajectories WHERE run_id = ? ORDER BY created_at, episode_id", (run_id,)
            )
        return [row[0] for row in rows]

    def iter_trajectories(self, *, run_id: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        for episode_id in self.trajectory_ids(run_id=run_id):
            data = self.get_trajectory(episode_id)
            if data is not None:
                yield episode_id, data


_SELECT = "SELECT id, cache_key, job_id, run_id, task_id, kind, gpu, status, result, created_at FROM evaluations"


def _record(row: tuple[Any, ...]) -> EvalRecord:
    return EvalRecord(int(row[0]), row[1], row[2], row[3], row[4], row[5], row[6], row[7], json.loads(row[8]),
                      float(row[9]))


def _connect_sqlite(url: StoreURL, busy_timeout_s: float) -> sqlite3.Connection:
    assert url.path is not None
    target = str(url.path)
    try:
        if target != ":memory:":
            url.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(target, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        if target != ":memory:":
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("store %s: WAL journaling unavailable (got %s); concurrent writers will wait longer",
                            target, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
    except (sqlite3.Error, OSError) as exc:
        raise classify(exc, f"sqlite:///{target}", "opening", url.path) from exc
    return conn


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _connect_server(driver: Any, url: StoreURL) -> Any:
    options = dict(url.options)
    try:
        if url.scheme == "postgresql":
            return driver.connect(host=url.host, port=url.port or 5432, user=url.user, password=url.password,
                                  dbname=url.database, **options)
        return driver.connect(host=url.host, port=url.port or 3306, user=url.user, password=url.password or "",
                              database=url.database, **options)
    except Exception as exc:  # noqa: BLE001 - each driver has its own error root
        raise StoreError(f"cannot connect to store {url.redacted()}: {exc}; check the server and credentials") from exc
