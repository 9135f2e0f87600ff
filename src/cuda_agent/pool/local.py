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
from typing import TYPE_CHECKING, Any, Callable, Sequence

from cuda_agent import procs
from cuda_agent.errors import PoolError
from cuda_agent.pool.base import JobBook, JobTiming, PoolStats, QueuedPool
from cuda_agent.pool.builds import BuildPool
from cuda_agent.pool.evaluators import Evaluator, RealEvaluator, query_gpu_names
from cuda_agent.pool.worker_process import WorkerFailure, WorkerProcess, WorkerReply

if TYPE_CHECKING:
    from cuda_agent.compiler.builder import BuildResult
    from cuda_agent.workspace import Workspace

log = logging.getLogger(__name__)

_STOP = object()
MAX_START_FAILURES = 3
MAX_SLOT_RESTARTS = 5


def detect_gpus() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` if set, else every GPU nvidia-smi lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    return [str(i) for i in range(len(query_gpu_names()))]


class _GpuSlot(threading.Thread):
    """The one thread that owns one GPU's worker process.

    A failure anywhere in the thread itself (not just in its worker) must neither strand the job it holds nor
    take the GPU out of service silently: `run` hands such a failure to the pool, which resolves the job with a
    reason and starts a replacement slot (up to `MAX_SLOT_RESTARTS` times)."""

    def __init__(self, pool: "LocalPool", gpu: str, restarts: int = 0) -> None:
        super().__init__(name=f"cuda-agent-gpu-{gpu}", daemon=True)
        self.pool = pool
        self.gpu = gpu
        self.restarts = restarts
        self.worker: WorkerProcess | None = None
        self.dead_reason: str | None = None
        self.current: tuple[Any, Future[Any], float] | None = None
        self.ready = threading.Event()

    def _start_worker(self, health_check: bool) -> bool:
        failures = 0
        while failures < MAX_START_FAILURES:
            if self.pool.stop_reason is not None:
                self.dead_reason = self.pool.stop_reason
                return False
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
                if procs.terminating():
                    return False
                time.sleep(min(2.0 * failures, 10.0))
        log.error("GPU %s taken out of the pool: %s", self.gpu, self.dead_reason)
        return False

    def _replace_worker(self) -> bool:
        if self.worker is not None:
            self.worker.kill()
        self.pool._book.replaced()
        return self._start_worker(health_check=self.pool.health_check_on_replace)

    def run(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # noqa: BLE001 - a failed slot is replaced, never left holding a job
            log.exception("GPU %s: the slot thread failed", self.gpu)
            self.pool._slot_failed(self, exc)
        finally:
            self.ready.set()

    def _serve(self) -> None:
        alive = self._start_worker(health_check=self.restarts > 0 and self.pool.health_check_on_replace)
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
            self.current = item
            outcome = self._run_job(job)
            replace = isinstance(outcome, WorkerFailure) or outcome.broken
            self.pool._complete(job, future, submitted, self.gpu, outcome)
            self.current = None
            if replace and not self._replace_worker():
                self.pool._slot_died(self)
                return
        if self.worker is not None:
            self.worker.stop()

    def _run_job(self, job: Any) -> WorkerReply | WorkerFailure:
        """Run one job on this slot's worker; every failure becomes a `WorkerFailure` (the worker is replaced)."""
        assert self.worker is not None
        self.pool._book.running(+1)
        try:
            return self.worker.run(job, self.pool._book.timeout_for(job, self.pool.eval_timeout_s))
        except WorkerFailure as failure:
            if self.pool.stop_reason is not None:
                return WorkerFailure(failure.stage, f"{self.pool.stop_reason}; the job was still running, and its "
                                                    "worker was killed", failure.started)
            return failure
        except Exception as exc:  # noqa: BLE001 - any failure here ends the job with a reason
            log.exception("GPU %s: running job %s failed", self.gpu, job.job_id)
            self.worker.kill()
            return WorkerFailure("eval_error", f"the pool could not run the job on GPU {self.gpu} "
                                               f"({type(exc).__name__}: {exc}); its worker was replaced")
        finally:
            self.pool._book.running(-1)


class LocalPool(QueuedPool):
    """Build and GPU pools on this machine.

    Args:
        gpus: GPU ids to use (default: `detect_gpus()`); with the stand-in evaluator any labels work (``range(64)``).
        evaluator: what each job runs (default `RealEvaluator()`; `StandInEvaluator` for CPU tests and planning).
        store: a `Store` to serve cached results from and to record every evaluation in (None: no caching).
        builds: a `BuildPool` (default: one made on first `submit_build`).
        eval_timeout_s: the outer limit per job (default: the job's, else its config's ``timeout_s`` and
            ``judge_allowance_s`` + 60 s).
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
        self.slot_failures: list[str] = []
        self.stop_reason: str | None = None
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

    def submit_build(self, workspace: "str | Path | Workspace") -> "Future[BuildResult]":
        with self._lock:
            if self._builds is None:
                self._builds = BuildPool()
        return self._builds.submit(workspace)

    def stats(self) -> PoolStats:
        c = self._book.counters
        with self._lock:
            dead, failures = list(self._dead), list(self.slot_failures)
        return PoolStats(self.backend, len(self._slots) - len(dead), self._queue.qsize(), c.running,
                         c.submitted, c.completed, c.failed, c.cached, c.replaced_workers, self.gpu_name,
                         {"gpus": list(self.gpus), "dead_gpus": dead, "slot_failures": len(failures),
                          "last_slot_failure": failures[-1] if failures else None})

    def _complete(self, job: Any, future: Future[Any], submitted: float, gpu: str,
                  outcome: WorkerReply | WorkerFailure) -> None:
        """Record and resolve a job; if recording fails the future still resolves (with `PoolError`)."""
        try:
            self._book.complete(job, future, submitted, gpu, outcome)
        except Exception as exc:  # noqa: BLE001 - never leave a future unresolved
            log.exception("job %s: completing failed", job.job_id)
            if not future.done():
                future.set_exception(PoolError(f"job {job.job_id}: the pool could not record its result: {exc}"))

    def _slot_failed(self, slot: _GpuSlot, exc: BaseException) -> None:
        """A slot thread raised: end its job with a reason, kill its worker, and start a replacement slot for its
        GPU (unless it has failed `MAX_SLOT_RESTARTS` times, the pool is stopping, or the command is ending)."""
        reason = f"the pool's thread for GPU {slot.gpu} failed ({type(exc).__name__}: {exc})"
        if slot.current is not None:
            job, future, submitted = slot.current
            slot.current = None
            self._complete(job, future, submitted, slot.gpu,
                           WorkerFailure("eval_error", f"{reason}; the job was not finished and the slot was replaced"))
        if slot.worker is not None:
            slot.worker.kill()
        with self._lock:
            self.slot_failures.append(reason)
            give_up = (slot.restarts >= MAX_SLOT_RESTARTS or self.stop_reason is not None or procs.terminating())
            if not give_up:
                replacement = _GpuSlot(self, slot.gpu, restarts=slot.restarts + 1)
                self._slots[self._slots.index(slot)] = replacement
        if give_up:
            slot.dead_reason = reason
            self._slot_died(slot)
            return
        log.warning("GPU %s: starting a replacement slot (%d/%d)", slot.gpu, slot.restarts + 1, MAX_SLOT_RESTARTS)
        replacement.start()

    def _slot_died(self, slot: _GpuSlot) -> None:
        with self._lock:
            self._dead.append(slot.gpu)
            everyone_dead = len(self._dead) == len(self._slots)
        if everyone_dead:
            self._fail_queued(f"every GPU worker failed; last error: {slot.dead_reason}")

    def _take_queued(self) -> list[tuple[Any, Future[Any], float]]:
        """Remove and return the queued jobs that can still run (stop tokens stay queued for the slots)."""
        taken, stops = [], 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                stops += 1
            elif item[1].set_running_or_notify_cancel():
                taken.append(item)
        for _ in range(stops):
            self._queue.put(_STOP)
        return taken

    def _fail_queued(self, reason: str) -> None:
        """Fail every queued job with `PoolError` (``reason``)."""
        for _, future, _ in self._take_queued():
            future.set_exception(PoolError(reason))

    def _after_enqueue(self) -> None:
        """A job queued just as the last slot died would wait forever: fail it now."""
        with self._lock:
            everyone_dead = len(self._dead) >= len(self._slots)
        if everyone_dead:
            self._fail_queued("every GPU worker failed")

    def close(self, wait: bool = True, cancel_pending: bool = False, timeout_s: float | None = None) -> None:
        """Stop taking jobs; finish the queued ones (or cancel them), stop the workers. Idempotent.

        ``timeout_s`` bounds the wait: past it, queued jobs fail with `PoolError` and running ones are killed
        (they resolve as ``crashed`` with a reason saying the pool stopped)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if cancel_pending:
            self._fail_queued("the pool was closed before this job ran")
        for _ in self._slots:
            self._queue.put(_STOP)
        if wait:
            self._join_slots(timeout_s)
        if self._builds is not None:
            self._builds.close(wait=wait)

    def _join_slots(self, timeout_s: float | None) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                alive = [slot for slot in self._slots if slot.is_alive()]
            if not alive:
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self.abort(f"the pool stopped after waiting {timeout_s:.0f} s for its jobs")
                deadline = None
                continue
            alive[0].join(remaining)

    def abort(self, reason: str) -> None:
        """End the queued and the running jobs with ``reason`` and start no new worker. Each ends as a failed
        `EvalResult` (``eval_error`` for the queued, ``crashed`` for the running) recorded in the store like any
        other, so a client asking later learns what happened."""
        with self._lock:
            self.stop_reason = reason
            slots = list(self._slots)
        for job, future, submitted in self._take_queued():
            self._complete(job, future, submitted, "-", WorkerFailure("eval_error", f"{reason} before this job ran"))
        for slot in slots:
            if slot.worker is not None:
                slot.worker.interrupt()

    def __enter__(self) -> "LocalPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
