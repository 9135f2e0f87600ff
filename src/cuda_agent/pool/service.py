"""`EvaluationService`: the HTTP service's state, independent of HTTP: jobs by id, their futures, waiting for them.

Kept apart from the request handler so that the rules (what a status is, how long a wait lasts, when an old job
is forgotten) are plain methods with tests of their own.
"""
from __future__ import annotations

import inspect
import logging
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Mapping

from cuda_agent import __version__
from cuda_agent.errors import ConfigError, PoolError, StoreError
from cuda_agent.pool.job import EvalJob, SolutionSnapshot
from cuda_agent.pool.validation import MAX_WAIT_S, check_build_request, check_job_request
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

STORE_CHECK_INTERVAL_S = 2.0
MAX_BUILD_WAIT_S = 900.0
STORE_DEEP_CHECK_INTERVAL_S = 60.0


def job_from_request(body: Any) -> EvalJob:
    """Build an `EvalJob` from a request body (see docs/http_api.md). Raises `RequestError` (a `ConfigError`)
    naming the field when a field is missing, mistyped, out of bounds or not finite."""
    return EvalJob.from_dict(check_job_request(body))


class EvaluationService:
    """Jobs submitted over HTTP: submit, look up, wait for; remembers the latest ``max_jobs`` in memory and falls
    back to the pool's store for older ones."""

    def __init__(self, pool: Any, *, max_jobs: int = 100_000) -> None:
        self.pool = pool
        self.max_jobs = max_jobs
        self._jobs: OrderedDict[str, tuple[EvalJob, Future[Any]]] = OrderedDict()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.started = time.time()
        self._reserved: set[str] = set()
        self._draining = False
        self._store_lock = threading.Lock()
        self._store_health: tuple[float, Any] | None = None
        self._deep_checked = float("-inf")

    def store_health(self) -> Any | None:
        """The pool's store's `StoreHealth` (None without a store), checked at most every
        STORE_CHECK_INTERVAL_S seconds, with SQLite's integrity check (which reads the whole file) at most every
        STORE_DEEP_CHECK_INTERVAL_S."""
        store = getattr(self.pool, "store", None)
        if store is None or not hasattr(store, "check"):
            return None
        with self._store_lock:
            now = time.monotonic()
            if self._store_health is None or now - self._store_health[0] > STORE_CHECK_INTERVAL_S:
                deep = now - self._deep_checked > STORE_DEEP_CHECK_INTERVAL_S
                self._store_health = (now, store.check(deep=deep))
                if deep:
                    self._deep_checked = now
            return self._store_health[1]

    def _require_open(self) -> None:
        if self._draining:
            raise PoolError("the server is stopping and takes no new work; retry when it is back, or use another")

    def _require_store(self) -> None:
        health = self.store_health()
        if health is not None and not health.ok:
            raise StoreError(f"the results store is unusable ({health.kind}: {health.problem}); the server takes "
                             "no new evaluations until it is repaired and restarted")

    def submit(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Queue the job in ``body``; return its status object. Raises `ConfigError` (bad request), `StoreError`
        (the store is damaged, so results could not be kept) or `PoolError` (the pool cannot take it)."""
        job = job_from_request(body)
        self._require_open()
        self._require_store()
        with self._lock:
            if job.job_id in self._jobs or job.job_id in self._reserved:
                raise ConfigError(f"job id {job.job_id} is already in use; leave job_id out to get a fresh one")
            self._reserved.add(job.job_id)
        try:
            future = self.pool.submit(job)
            with self._lock:
                self._jobs[job.job_id] = (job, future)
                while len(self._jobs) > self.max_jobs:
                    self._jobs.popitem(last=False)
        finally:
            with self._lock:
                self._reserved.discard(job.job_id)
        future.add_done_callback(self._notify)
        return self._status(job.job_id, job, future)

    def cache_key(self, body: Mapping[str, Any]) -> str:
        return self.pool.cache_key(job_from_request(body))

    def _notify(self, _: Future[Any]) -> None:
        with self._changed:
            self._changed.notify_all()

    @staticmethod
    def _status(job_id: str, job: EvalJob, future: Future[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": job_id, "task_id": job.task.id, "kind": job.kind, "result": None, "error": None}
        if not future.done():
            out["status"] = "running" if future.running() else "queued"
        elif future.cancelled():
            out.update(status="failed", error="cancelled before it ran")
        elif future.exception() is not None:
            out.update(status="failed", error=str(future.exception()))
        else:
            out.update(status="done", result=future.result().to_dict())
        return out

    def status(self, job_id: str) -> dict[str, Any] | None:
        """The job's status object, or None if neither memory nor the store knows it."""
        with self._lock:
            entry = self._jobs.get(job_id)
        if entry is not None:
            return self._status(job_id, *entry)
        store = getattr(self.pool, "store", None)
        record = store.record_for_job(job_id) if store is not None else None
        if record is None:
            return None
        return {"id": job_id, "task_id": record.task_id, "kind": record.kind, "status": "done",
                "result": record.result, "error": None}

    def wait(self, job_ids: list[str], wait_s: float) -> list[dict[str, Any]]:
        """Statuses of ``job_ids`` once at least one is finished (done or failed) or ``wait_s`` passed (at most
        MAX_WAIT_S); unknown ids come back with status ``unknown``."""
        deadline = time.monotonic() + max(0.0, min(wait_s, MAX_WAIT_S))
        with self._changed:
            while True:
                futures = [self._jobs[i][1] for i in job_ids if i in self._jobs]
                finished = any(f.done() for f in futures) or len(futures) < len(job_ids)
                remaining = deadline - time.monotonic()
                if finished or remaining <= 0:
                    break
                self._changed.wait(remaining)
        return [self.status(i) or {"id": i, "status": "unknown", "result": None, "error": "no such job"}
                for i in job_ids]

    def build(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Build a solution snapshot in a scratch folder and return the `BuildResult` as a dict (the library path
        refers to the server and is dropped). Raises `ConfigError` on a malformed body."""
        body = check_build_request(body)
        self._require_open()
        task = Task.from_dict(dict(body["task"]))
        snapshot = SolutionSnapshot.from_dict(body["solution"])
        if snapshot.kind != "workspace":
            raise ConfigError("only workspace solutions are built; single-file solutions build when evaluated")
        scratch = Path(tempfile.mkdtemp(prefix="cuda-agent-build-"))
        try:
            root = snapshot.materialize(task, scratch)
            try:
                result = self.pool.submit_build(root).result(timeout=MAX_BUILD_WAIT_S)
            except FutureTimeout as exc:
                raise PoolError(f"the build did not finish within {MAX_BUILD_WAIT_S:.0f} s") from exc
            data = result.to_dict()
            data["library"] = None
            return data
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def health(self) -> dict[str, Any]:
        """The service's state in plain words: ``status`` is ``ok``, ``degraded`` (it still evaluates, but a GPU is
        out of service or the store is unusable; ``problems`` says which) or ``down`` (no GPU worker alive);
        ``ok`` is true only for ``ok``."""
        stats = self.pool.stats()
        problems: list[str] = []
        if stats.workers == 0:
            problems.append("no GPU worker is alive: no evaluation can run")
        dead = stats.extra.get("dead_gpus") or []
        if dead and stats.workers:
            problems.append(f"GPU(s) {', '.join(map(str, dead))} taken out of service")
        store = self.store_health()
        if store is not None and not store.ok:
            problems.append(f"store {store.kind}: {store.problem}")
        status = "down" if stats.workers == 0 else ("degraded" if problems else "ok")
        return {"ok": status == "ok", "status": status, "problems": problems, "version": __version__,
                "uptime_s": time.time() - self.started, "evaluator": self.pool.evaluator.identity(),
                "store": store.to_dict() if store is not None else None, **stats.to_dict()}

    def drain(self, drain_s: float | None) -> None:
        """Stop taking jobs (submissions get `PoolError`, a 503) and let the queued and running ones finish, for at
        most ``drain_s`` seconds; status requests are still answered meanwhile, so clients collect the results."""
        self._draining = True
        self.close(drain_s)

    def close(self, drain_s: float | None = None) -> None:
        """Close the pool: queued and running jobs finish, for at most ``drain_s`` seconds where the pool supports
        a bound (past it they fail with a reason)."""
        try:
            if drain_s is not None and "timeout_s" in inspect.signature(self.pool.close).parameters:
                self.pool.close(timeout_s=drain_s)
            else:
                self.pool.close()
        except PoolError:
            log.exception("closing the pool failed")
