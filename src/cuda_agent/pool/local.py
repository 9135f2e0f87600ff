"""`LocalPool`: one machine, all its GPUs, nothing else to start.

One worker process per GPU, each owned by one thread that takes jobs from a shared queue one at a time: that
thread is the only path to its GPU, so two evaluations never overlap on one GPU. A worker that crashes, hangs past
its deadline, or reports a broken CUDA context is killed and replaced (after a GPU health check, for real
evaluators); its job resolves to a failed `EvalResult` saying why.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Sequence

from cuda_agent.errors import PoolError
from cuda_agent.pool.base import JobBook, JobTiming, PoolStats, QueuedPool
from cuda_agent.pool.builds import BuildPool
from cuda_agent.pool.evaluators import Evaluator, RealEvaluator, query_gpu_names
from cuda_agent.pool.worker import WorkerFailure, WorkerProcess

log = logging.getLogger(__name__)

_STOP = object()
MAX_START_FAILURES = 3


def detect_gpus() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` if set, else every GPU nvidia-smi lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(len(query_gpu_names()))]


class _GpuSlot(threading.Thread):
    """The one thread that owns one GPU's worker process."""

    def __init__(self, pool: "LocalPool", gpu: str) -> None:
        super().__init__(name=f"cuda-agent-gpu-{gpu}", daemon=True)
        self.pool = pool
        self.gpu = gpu
        self.worker: WorkerProcess | None = None
        self.dead_reason: str | None = None
        self.ready = threading.Event()

    def _start_worker(self, health_check: bool) -> bool:
        failures = 0
        while failures < MAX_START_FAILURES:
            worker = WorkerProcess(self.gpu, self.pool.evaluator, health_check=health_check,
                                   log_dir=self.pool.log_dir)
            try:
                worker.start(self.pool.start_timeout_s)
                self.worker = worker
                return True
            except PoolError as exc:
                failures += 1
                log.warning("GPU %s: worker start failed (%d/%d): %s", self.gpu, failures, MAX_START_FAILURES, exc)
                self.dead_reason = str(exc)
                time.sleep(min(2.0 * failures, 10.0))
        log.error("GPU %s taken out of the pool: %s", self.gpu, self.dead_reason)
        return False

    def _replace_worker(self) -> bool:
        if self.worker is not None:
            self.worker.kill()
        self.pool._book.replaced()
        return self._start_worker(health_check=self.pool.health_check_on_replace)

    def run(self) -> None:
        alive = self._start_worker(health_check=False)
        self.ready.set()
        if not alive:
            self.pool._slot_died(self)
            return
        jobs = self.pool._queue
        while True:
            item = jobs.get()
            if item is _STOP:
                break
            job, future, submitted = item
            if not future.set_running_or_notify_cancel():
                continue
            assert self.worker is not None
            self.pool._book.running(+1)
            outcome: Any
            try:
                outcome = self.worker.run(job, self.pool._book.timeout_for(job, self.pool.eval_timeout_s))
            except WorkerFailure as failure:
                outcome = failure
            finally:
                self.pool._book.running(-1)
            replace = isinstance(outcome, WorkerFailure) or outcome.broken
            try:
                self.pool._book.complete(job, future, submitted, self.gpu, outcome)
            except Exception as exc:  # noqa: BLE001 - never leave a future unresolved
                log.exception("job %s: completing failed", job.job_id)
                if not future.done():
                    future.set_exception(PoolError(f"job {job.job_id}: the pool could not record its result: {exc}"))
            if replace and not self._replace_worker():
                self.pool._slot_died(self)
                return
        if self.worker is not None:
            self.worker.stop()


class LocalPool(QueuedPool):
    """Build and GPU pools on this machine.

    Args:
        gpus: GPU ids to use (default: `detect_gpus()`); with the stand-in evaluator any labels work (``range(64)``).
        evaluator: what each job runs (default `RealEvaluator()`; `StandInEvaluator` for CPU tests and planning).
        store: a `Store` to serve cached results from and to record every evaluation in (None: no caching).
        builds: a `BuildPool` (default: one made on first `submit_build`).
        eval_timeout_s: the outer limit per job (default: the job's, else its config's ``timeout_s`` + 60 s).
        max_queue: refuse submissions beyond this many queued jobs (0: unbounded).
        health_check_on_replace: probe the GPU before a replacement worker takes jobs (default: for real
            evaluators only).
        on_complete: called with each job's `JobTiming` (progress displays).

    Raises `PoolError` when no GPU is found or every worker fails to start.
    """

    backend = "local"

    def __init__(self, gpus: Sequence[int | str] | None = None, *, evaluator: Evaluator | None = None,
                 store: Any | None = None, builds: BuildPool | None = None, eval_timeout_s: float | None = None,
                 max_queue: int = 0, health_check_on_replace: bool | None = None, start_timeout_s: float = 300.0,
                 on_complete: Callable[[JobTiming], None] | None = None, log_dir: str | Path | None = None) -> None:
        self.evaluator: Evaluator = evaluator or RealEvaluator()
        gpu_ids = [str(g) for g in (gpus if gpus is not None else detect_gpus())]
        if not gpu_ids:
            raise PoolError("no GPU found for the local pool (nvidia-smi lists none and CUDA_VISIBLE_DEVICES is "
                            "empty); pass gpus=[...] or use StandInEvaluator for CPU-only work")
        if len(set(gpu_ids)) != len(gpu_ids):
            raise PoolError(f"GPU ids must be distinct, got {gpu_ids}: two workers on one GPU would overlap")
        self.gpus = gpu_ids
        self.eval_timeout_s = eval_timeout_s
        self.max_queue = max_queue
        self.health_check_on_replace = (isinstance(self.evaluator, RealEvaluator)
                                        if health_check_on_replace is None else health_check_on_replace)
        self.start_timeout_s = start_timeout_s
        self.log_dir = Path(log_dir) if log_dir else None
        self._book = JobBook(self.evaluator, store, self.evaluator.gpu_name(), on_complete)
        self._builds = builds
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._slots = [_GpuSlot(self, gpu) for gpu in gpu_ids]
        self._dead: list[str] = []
        for slot in self._slots:
            slot.start()

    @property
    def store(self) -> Any | None:
        return self._book.store

    @property
    def gpu_name(self) -> str:
        return self._book.gpu_name

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        """Block until every worker has started (or failed to); raises `PoolError` if none is alive."""
        deadline = time.monotonic() + timeout_s
        for slot in self._slots:
            slot.ready.wait(max(0.0, deadline - time.monotonic()))
        if len(self._dead) == len(self._slots):
            raise PoolError(f"no GPU worker could start; last error: {self._slots[0].dead_reason}")

    def _check_accepting(self) -> None:
        with self._lock:
            if self._closed:
                raise PoolError("the pool is closed; create a new one")
            if len(self._dead) == len(self._slots):
                raise PoolError(f"every GPU worker failed; last error: {self._slots[0].dead_reason}")
            if self.max_queue and self._queue.qsize() >= self.max_queue:
                raise PoolError(f"the pool queue is full ({self.max_queue} jobs); retry later or raise max_queue")

    def submit_build(self, workspace: str | Path | Any) -> "Future[Any]":
        with self._lock:
            if self._builds is None:
                self._builds = BuildPool()
        return self._builds.submit(workspace)

    def stats(self) -> PoolStats:
        c = self._book.counters
        return PoolStats(self.backend, len(self._slots) - len(self._dead), self._queue.qsize(), c.running,
                         c.submitted, c.completed, c.failed, c.cached, c.replaced_workers, self.gpu_name,
                         {"gpus": list(self.gpus), "dead_gpus": list(self._dead)})

    def _slot_died(self, slot: _GpuSlot) -> None:
        with self._lock:
            self._dead.append(slot.gpu)
            everyone_dead = len(self._dead) == len(self._slots)
        if everyone_dead:
            self._fail_queued(f"every GPU worker failed; last error: {slot.dead_reason}")

    def _fail_queued(self, reason: str) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                _, future, _ = item
                if future.set_running_or_notify_cancel():
                    future.set_exception(PoolError(reason))

    def close(self, wait: bool = True, cancel_pending: bool = False) -> None:
        """Stop taking jobs; finish the queued ones (or cancel them), stop the workers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if cancel_pending:
            self._fail_queued("the pool was closed before this job ran")
        for _ in self._slots:
            self._queue.put(_STOP)
        if wait:
            for slot in self._slots:
                slot.join()
        if self._builds is not None:
            self._builds.close(wait=wait)

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
