"""The pool with a store: the cache serves repeated evaluations, force re-runs, failures are not cached."""
from __future__ import annotations

from pathlib import Path

from pool_helpers import read_log, standin_job

from cuda_agent.pool import LocalPool, StandInEvaluator
from cuda_agent.pool.runs import run_jobs
from cuda_agent.store import ERROR, Store
from cuda_agent.tasks import Task


def test_cache_hits_force_and_uncached_failures(task: Task, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.05, log_path=str(log)), store=store) as pool:
        job = standin_job(task, tag="same")
        first = pool.submit(job).result(timeout=30)
        again = pool.submit(standin_job(task, tag="same")).result(timeout=30)
        assert again.stage == first.stage and len(read_log(log)) == 1, "the identical evaluation was not rerun"
        assert pool.timeline()[-1].status == "cached"
        pool.submit(standin_job(task, tag="same", force=True)).result(timeout=30)
        assert len(read_log(log)) == 2
        assert pool.cache_key(standin_job(task, tag="same", kind="verify")) != pool.cache_key(job)
        crash = standin_job(task, fault="crash")
        assert pool.submit(crash).result(timeout=30).stage == "crashed"
        assert store.record_for_job(crash.job_id).status == ERROR
        assert store.get_record(pool.cache_key(crash)) is None
        stored = store.get(pool.cache_key(job))
        assert stored is not None and stored.correct
    other_gpu = LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.05, gpu="other-gpu"))
    assert other_gpu.cache_key(job) != pool.cache_key(job)
    other_gpu.close()
    store.close()


def test_run_jobs_counts_cached_jobs_and_reports_progress(task: Task, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    seen: list[tuple[int, int]] = []
    with LocalPool(gpus=["0", "1"], evaluator=StandInEvaluator(seconds=0.02, log_path=str(log)),
                   store=store) as pool:
        pool.submit(standin_job(task, tag="0")).result(timeout=30)
        jobs = [standin_job(task, tag=str(i), job_id=f"r/{i}") for i in range(6)]
        results = run_jobs(pool, jobs, store=store, run_id="r", progress=lambda d, t, _: seen.append((d, t)))
    assert set(results) == {j.job_id for j in jobs} and all(r.correct for r in results.values())
    assert len(read_log(log)) == 6, "the job evaluated before the run was served from the cache"
    assert store.run_progress("r").complete
    assert sorted(seen)[-1] == (6, 6)
    store.close()
