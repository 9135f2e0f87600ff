"""Resumable runs: a named set of jobs whose finished results are in the store, so a killed run picks up where it
stopped instead of starting over."""
from __future__ import annotations

import logging
from concurrent.futures import Future, as_completed
from dataclasses import replace
from typing import Any, Callable, Sequence

from cuda_agent.evaluator.result import EvalResult

from cuda_agent.errors import PoolError
from cuda_agent.pool.base import RunPool
from cuda_agent.pool.job import EvalJob
from cuda_agent.store import RunJob, Store

log = logging.getLogger(__name__)

Progress = Callable[[int, int, EvalResult], None]


def run_jobs(pool: RunPool, jobs: Sequence[EvalJob], *, store: Store, run_id: str,
             progress: Progress | None = None, meta: dict[str, Any] | None = None) -> dict[str, EvalResult]:
    """Run ``jobs`` as run ``run_id`` and return ``{job_id: EvalResult}`` for every job of the run.

    Jobs the store already holds a finished (``done``) result for under this run are not run again; every result is
    committed as it arrives (by the pool when it shares this store, else here), so killing the process loses only
    the jobs in flight. Job ids identify jobs within a run: give deterministic ids (``f"{task.id}/{n}"``) when
    calling again with rebuilt jobs, or call `resume_run`, which rebuilds them from the store.

    ``progress(finished, total, result)`` is called after each job (and once per already-finished job first).
    Raises `PoolError` if a job's future fails.
    """
    ids = [job.job_id for job in jobs]
    if len(set(ids)) != len(ids):
        raise PoolError(f"run {run_id}: job ids must be unique within a run")
    jobs = [replace(job, run_id=run_id) for job in jobs]
    store.begin_run(run_id, [RunJob(job.job_id, n, pool.cache_key(job), job.to_dict()) for n, job in enumerate(jobs)],
                    meta)
    state = store.run_progress(run_id)
    total = state.total
    results: dict[str, EvalResult] = {}
    for job_id in sorted(state.finished):
        record = store.record_for_job(job_id)
        if record is not None:
            results[job_id] = record.eval_result()
            if progress:
                progress(len(results), total, results[job_id])
    pending_ids = {job.job_id for job in state.pending}
    todo = [job for job in jobs if job.job_id in pending_ids]
    log.info("run %s: %d of %d jobs already finished, %d to run", run_id, len(results), total, len(todo))
    persist_here = pool.store is not store
    by_future: dict[Future[EvalResult], EvalJob] = {pool.submit(job): job for job in todo}
    for future in as_completed(by_future):
        job = by_future[future]
        try:
            result = future.result()
        except Exception as exc:
            raise PoolError(f"run {run_id}: job {job.job_id} failed in the pool ({exc}); rerun to resume") from exc
        if persist_here:
            failed = result.stage == "eval_error" or bool((result.extra or {}).get("pool", {}).get("failure"))
            store.put(pool.cache_key(job), result, job_id=job.job_id, run_id=run_id, task_id=job.task.id,
                      kind=job.kind, gpu=pool.gpu_name, status="error" if failed else "done")
        results[job.job_id] = result
        if progress:
            progress(len(results), total, result)
    given = {job.job_id for job in jobs}
    for job in state.pending:
        if job.job_id not in given:
            log.warning("run %s: job %s is registered but was not given; use resume_run to run it", run_id, job.job_id)
    return results


def resume_run(pool: RunPool, *, store: Store, run_id: str, progress: Progress | None = None) -> dict[str, EvalResult]:
    """Finish run ``run_id`` from the jobs registered in the store (no need to rebuild them).
    Raises `PoolError` when the store knows no such run."""
    registered = store.run_jobs(run_id)
    if not registered:
        raise PoolError(f"the store has no run {run_id!r}; known runs: {', '.join(store.runs()) or 'none'}")
    jobs = [EvalJob.from_dict(entry.job) for entry in registered]
    return run_jobs(pool, jobs, store=store, run_id=run_id, progress=progress)
