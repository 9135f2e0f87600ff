"""`EvaluationService`: the HTTP service's state, independent of HTTP: jobs by id, their futures, waiting for them.

Kept apart from the request handler so that the rules (what a status is, how long a wait lasts, when an old job
is forgotten) are plain methods with tests of their own.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Mapping

from cuda_agent import __version__
from cuda_agent.errors import ConfigError, PoolError
from cuda_agent.pool.job import EvalJob, SolutionSnapshot
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0


def job_from_request(body: Mapping[str, Any]) -> EvalJob:
    """Build an `EvalJob` from a request body (see docs/http_api.md). Raises `ConfigError` when malformed."""
    if not isinstance(body, Mapping):
        raise ConfigError("the request body must be a JSON object")
    config = body.get("config")
    if config is not None:
        from cuda_agent.evaluator.config import EvalConfig

        if not isinstance(config, Mapping):
            raise ConfigError("config must be an object of EvalConfig fields")
        EvalConfig.from_dict(dict(config))
    return EvalJob.from_dict({**body, "config": config})


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

    def submit(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Queue the job in ``body``; return its status object. Raises `ConfigError` (bad request) or `PoolError`
        (the pool cannot take it)."""
        job = job_from_request(body)
        with self._lock:
            if job.job_id in self._jobs:
                raise ConfigError(f"job id {job.job_id} is already in use; leave job_id out to get a fresh one")
        future = self.pool.submit(job)
        with self._lock:
            self._jobs[job.job_id] = (job, future)
            while len(self._jobs) > self.max_jobs:
                self._jobs.popitem(last=False)
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
        if not isinstance(body, Mapping) or "task" not in body or "solution" not in body:
            raise ConfigError("a build request needs task and solution")
        task = Task.from_dict(dict(body["task"]))
        snapshot = SolutionSnapshot.from_dict(body["solution"])
        if snapshot.kind != "workspace":
            raise ConfigError("only workspace solutions are built; single-file solutions build when evaluated")
        scratch = Path(tempfile.mkdtemp(prefix="cuda-agent-build-"))
        try:
            root = snapshot.materialize(task, scratch)
            result = self.pool.submit_build(root).result()
            data = result.to_dict()
            data["library"] = None
            return data
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def health(self) -> dict[str, Any]:
        stats = self.pool.stats()
        return {"ok": stats.workers > 0, "version": __version__, "uptime_s": time.time() - self.started,
                "evaluator": self.pool.evaluator.identity(), **stats.to_dict()}

    def close(self) -> None:
        try:
            self.pool.close()
        except PoolError:
            log.exception("closing the pool failed")
