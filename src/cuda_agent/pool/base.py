"""What every pool shares: the `Pool` protocol, job timings, and the bookkeeping around one job (cache look-up
before, result assembly and storage after)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, runtime_checkable

from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.pool.evaluators import Evaluator
from cuda_agent.pool.job import MAX_JOB_TIMEOUT_S, EvalJob, positive_seconds
from cuda_agent.pool.worker_process import WorkerFailure, WorkerReply
from cuda_agent.store.keys import cache_key, library_versions

if TYPE_CHECKING:
    from cuda_agent.compiler.builder import BuildResult
    from cuda_agent.store.store import Store
    from cuda_agent.workspace import Workspace

log = logging.getLogger(__name__)
T = TypeVar("T")

TIMEOUT_GRACE_S = 60.0
DEFAULT_EVAL_TIMEOUT_S = 300.0
DEFAULT_JUDGE_ALLOWANCE_S = EvalConfig.judge_allowance_s  # the dataclass field's default


@runtime_checkable
class Pool(Protocol):
    """A place to run builds and evaluations. Every implementation (`LocalPool`, `RayPool`, `PoolClient`) runs at
    most one evaluation at a time on each GPU and always resolves a future: with a result, or with a failed result
    that says why (a crashed worker, a timeout), never by losing the job."""

    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        """Queue an evaluation; the future gives an `EvalResult`."""

    def submit_build(self, workspace: "str | Path | Workspace") -> "Future[BuildResult]":
        """Queue a build of a workspace folder; the future gives a `BuildResult`."""

    async def aevaluate(self, job: EvalJob) -> EvalResult:
        """``await`` an evaluation from asyncio code."""

    def close(self) -> None:
        """Finish queued work, stop the workers and release the GPUs."""


class RunPool(Pool, Protocol):
    """A pool that runs the store's runs (`pool.runs.run_jobs`): every implementation above is one. It names each
    job's cache key, the store it commits results to itself (None: the caller commits them) and its GPU."""

    @property
    def store(self) -> "Store | None":
        """The store this pool commits results to, or None."""

    @property
    def gpu_name(self) -> str:
        """The GPU the pool's results are keyed by."""

    def cache_key(self, job: EvalJob) -> str:
        """The store key of ``job``'s result."""


@dataclass(frozen=True)
class JobTiming:
    """When and where one job ran, from the worker's own clock: the record that proves exclusive GPU use.

    ``status`` is ``done`` (a result from the evaluator), ``error`` (the pool's failure: crash, timeout) or
    ``cached`` (served from the store, no GPU used: ``started == finished``)."""

    job_id: str
    task_id: str
    gpu: str
    worker_pid: int | None
    submitted: float
    started: float
    finished: float
    stage: str
    status: str


@dataclass
class PoolCounters:
    submitted: int = 0
    completed: int = 0
    failed: int = 0
    cached: int = 0
    replaced_workers: int = 0
    running: int = 0


@dataclass(frozen=True)
class PoolStats:
    """A snapshot of a pool's state, for health endpoints and progress displays."""

    backend: str
    workers: int
    queued: int
    running: int
    submitted: int
    completed: int
    failed: int
    cached: int
    replaced_workers: int
    gpu_name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class JobBook:
    """The bookkeeping shared by pool backends: cache keys, store look-ups and writes, timings and counters.

    Writes to the store happen before a future resolves, so anything a caller has seen finished is on disk.
    """

    def __init__(self, evaluator: Evaluator, store: "Store | None", gpu_name: str,
                 on_complete: Callable[[JobTiming], None] | None = None, timeline_limit: int = 100_000) -> None:
        self.evaluator = evaluator
        self.store = store
        self.gpu_name = gpu_name
        self.on_complete = on_complete
        self.counters = PoolCounters()
        self._timeline: deque[JobTiming] = deque(maxlen=timeline_limit)
        self._lock = threading.Lock()

    def key(self, job: EvalJob) -> str:
        settings = {"kind": job.kind, "config": job.config_dict(), "evaluator": self.evaluator.identity()}
        return cache_key(job.task.code, job.solution.digest(), self.gpu_name, settings, library_versions())

    def timeout_for(self, job: EvalJob, default_s: float | None) -> float:
        """The outer limit for ``job``: its own, else the pool's, else its config's (``timeout_s`` and
        ``judge_allowance_s``) plus a grace period.
        Raises `ConfigError` if that is not a finite positive number (a thread waiting on it would break)."""
        if job.timeout_s is not None:
            limit = job.timeout_s
        elif default_s is not None:
            limit = default_s
        else:
            config = job.config_dict()
            configured, allowance = config.get("timeout_s"), config.get("judge_allowance_s")
            limit = TIMEOUT_GRACE_S + (DEFAULT_EVAL_TIMEOUT_S if configured is None else
                                       positive_seconds(configured, f"job {job.job_id}'s config timeout_s"))
            allowance = DEFAULT_JUDGE_ALLOWANCE_S if allowance is None else allowance
            if allowance != 0:  # the judge's own first measurements of a task (`EvalConfig.judge_allowance_s`)
                limit += positive_seconds(allowance, f"job {job.job_id}'s config judge_allowance_s")
        return positive_seconds(limit, f"job {job.job_id}'s time limit", 2 * MAX_JOB_TIMEOUT_S + TIMEOUT_GRACE_S)

    def timeline(self) -> list[JobTiming]:
        with self._lock:
            return list(self._timeline)

    def submitted(self) -> None:
        with self._lock:
            self.counters.submitted += 1

    def running(self, delta: int) -> None:
        with self._lock:
            self.counters.running += delta

    def replaced(self) -> None:
        with self._lock:
            self.counters.replaced_workers += 1

    def cached(self, job: EvalJob) -> Future[EvalResult] | None:
        """A resolved future when the store already holds this evaluation (and the job does not force it)."""
        if self.store is None or job.force:
            return None
        record = self.store.get_record(self.key(job))
        if record is None:
            return None
        result = EvalResult.from_dict(record.result)
        now = time.time()
        if job.run_id is not None and record.run_id != job.run_id:
            self.store.put(record.cache_key, record.result, job_id=job.job_id, run_id=job.run_id,
                           task_id=job.task.id, kind=job.kind, gpu=record.gpu)
        self._finish(JobTiming(job.job_id, job.task.id, record.gpu, None, now, now, now, result.stage, "cached"))
        future: Future[EvalResult] = Future()
        future.set_result(result)
        return future

    def complete(self, job: EvalJob, future: Future[EvalResult], submitted: float, gpu: str,
                 outcome: WorkerReply | WorkerFailure) -> EvalResult:
        """Turn a worker's reply (or failure) into an `EvalResult`, store it, record the timing, resolve the future."""
        pool_info: dict[str, Any] = {"job_id": job.job_id, "gpu": gpu, "submitted": submitted}
        if isinstance(outcome, WorkerFailure):
            started = outcome.started if outcome.started is not None else time.time()
            finished = time.time()
            pool_info.update(started=started, finished=finished, failure=outcome.stage)
            result = failure(job.task.id, outcome.stage, outcome.reason, extra={"pool": pool_info})
            status, pid = "error", None
        elif outcome.result is None:
            started, finished, pid = outcome.started, outcome.finished, outcome.pid
            pool_info.update(started=started, finished=finished, worker_pid=pid)
            result = failure(job.task.id, "eval_error", f"the evaluator failed on GPU {gpu}: {outcome.error}",
                             extra={"pool": pool_info})
            status = "error"
        else:
            started, finished, pid = outcome.started, outcome.finished, outcome.pid
            pool_info.update(started=started, finished=finished, worker_pid=pid, broken_context=outcome.broken)
            data = dict(outcome.result)
            data["extra"] = {**dict(data.get("extra") or {}), "pool": pool_info}
            try:
                result = EvalResult.from_dict(data)
                status = "done"
            except (TypeError, ValueError) as exc:
                result = failure(job.task.id, "eval_error", f"the evaluator returned a malformed result ({exc})",
                                 extra={"pool": pool_info})
                status = "error"
        if self.store is not None:
            try:
                self.store.put(self.key(job), result, job_id=job.job_id, run_id=job.run_id, task_id=job.task.id,
                               kind=job.kind, gpu=self.gpu_name, status=status)
            except Exception:  # noqa: BLE001 - a store failure must not lose the result for the caller
                log.exception("could not store the result of job %s", job.job_id)
        self._finish(JobTiming(job.job_id, job.task.id, gpu, pid, submitted, started, finished, result.stage, status))
        if not future.done():
            future.set_result(result)
        return result

    def _finish(self, timing: JobTiming) -> None:
        with self._lock:
            self._timeline.append(timing)
            if timing.status == "cached":
                self.counters.cached += 1
            elif timing.status == "error":
                self.counters.failed += 1
            else:
                self.counters.completed += 1
        if self.on_complete is not None:
            try:
                self.on_complete(timing)
            except Exception:  # noqa: BLE001 - a progress callback must not break the pool
                log.exception("pool progress callback failed")


async def await_future(future: "Future[T]") -> T:
    """Await a `concurrent.futures.Future` from asyncio code."""
    return await asyncio.wrap_future(future)


class QueuedPool:
    """The front every queue-fed pool shares: the cache lookup, the enqueue, and the blocking and async forms.

    A subclass provides ``_book`` (a `JobBook`), ``_queue`` (its workers' queue) and ``_check_accepting()``, which
    raises `PoolError` when no new job can be taken."""

    _book: JobBook
    _queue: Any

    def _check_accepting(self) -> None:
        raise NotImplementedError

    def cache_key(self, job: EvalJob) -> str:
        return self._book.key(job)

    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        """Queue ``job``; the future resolves to an `EvalResult` (served from the store when cached).
        Raises `PoolError` when the pool takes no new jobs (closed, queue full, no GPU left) and `ConfigError`
        when the job's time limit is not a finite positive number."""
        self._check_accepting()
        self._book.timeout_for(job, getattr(self, "eval_timeout_s", None))  # a bad limit is refused here, not later
        self._book.submitted()
        cached = self._book.cached(job)
        if cached is not None:
            return cached
        future: Future[EvalResult] = Future()
        self._queue.put((job, future, time.time()))
        self._after_enqueue()
        return future

    def _after_enqueue(self) -> None:
        """Called after each job is queued (a pool whose workers may all be gone fails it here)."""

    def evaluate(self, job: EvalJob) -> EvalResult:
        return self.submit(job).result()

    async def aevaluate(self, job: EvalJob) -> EvalResult:
        return await await_future(self.submit(job))

    def submit_build(self, workspace: "str | Path | Workspace") -> "Future[BuildResult]":
        raise NotImplementedError

    async def abuild(self, workspace: "str | Path | Workspace") -> "BuildResult":
        return await await_future(self.submit_build(workspace))

    def timeline(self) -> list[JobTiming]:
        """When and where each finished job ran (worker clocks), oldest first."""
        return self._book.timeline()
