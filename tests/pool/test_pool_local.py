"""LocalPool with the stand-in evaluator: exclusive GPU use, queueing, faults replaced, timeouts, snapshots."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError, PoolError
from cuda_agent.pool import EvalJob, LocalPool, StandInEvaluator
from cuda_agent.tasks import Task
from pool_helpers import overlapping_pairs, pid_alive, read_log, standin_job


def test_each_gpu_runs_one_job_at_a_time(task: Task, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    with LocalPool(gpus=[0, 1, 2, 3], evaluator=StandInEvaluator(seconds=0.15, log_path=str(log))) as pool:
        jobs = [standin_job(task, tag=str(i)) for i in range(24)]
        started = time.monotonic()
        results = [f.result(timeout=60) for f in [pool.submit(job) for job in jobs]]
        elapsed = time.monotonic() - started
        timeline = pool.timeline()
    entries = read_log(log)
    assert all(r.stage == "timed" and r.correct for r in results)
    assert sorted(e["job_id"] for e in entries) == sorted(j.job_id for j in jobs), "each job ran exactly once"
    assert overlapping_pairs(entries) == []
    assert {e["gpu"] for e in entries} == {"0", "1", "2", "3"}
    assert elapsed < 24 * 0.15, "four GPUs must work in parallel"
    assert {t.job_id: t.gpu for t in timeline} == {e["job_id"]: e["gpu"] for e in entries}
    for result in results:
        assert result.extra["pool"]["gpu"] == result.device.split(":")[1]


def test_jobs_queue_behind_a_busy_gpu_in_order(task: Task, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    with LocalPool(gpus=["7"], evaluator=StandInEvaluator(seconds=0.1, log_path=str(log))) as pool:
        jobs = [standin_job(task, tag=str(i)) for i in range(5)]
        futures = [pool.submit(job) for job in jobs]
        assert pool.stats().queued + pool.stats().running >= 3
        for future in futures:
            future.result(timeout=30)
    entries = read_log(log)
    assert [e["job_id"] for e in sorted(entries, key=lambda e: e["start"])] == [j.job_id for j in jobs]
    assert overlapping_pairs(entries) == []
    assert entries[-1]["end"] - entries[0]["start"] >= 5 * 0.1


@pytest.mark.parametrize("fault, stage", [("crash", "crashed"), ("broken", "runtime_error")])
def test_a_faulty_worker_is_replaced_and_its_job_reported(task: Task, tmp_path: Path, fault: str, stage: str) -> None:
    log = tmp_path / "runs.jsonl"
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.05, log_path=str(log))) as pool:
        before = pool.submit(standin_job(task)).result(timeout=30)
        bad = pool.submit(standin_job(task, fault=fault)).result(timeout=30)
        after = [pool.submit(standin_job(task, tag=str(i))).result(timeout=30) for i in range(2)]
        stats = pool.stats()
    assert bad.stage == stage and not bad.correct and bad.reward == -1
    assert bad.reason, "the failed job says why"
    if fault == "crash":
        assert "SIGSEGV" in bad.reason and "replaced" in bad.reason
    else:
        assert "illegal memory access" in bad.reason
    assert all(r.correct for r in after)
    old_pid = before.extra["pool"]["worker_pid"]
    assert {r.extra["pool"]["worker_pid"] for r in after} != {old_pid}, "a fresh worker took over"
    assert not pid_alive(old_pid)
    assert stats.replaced_workers == 1 and stats.failed == (1 if fault == "crash" else 0)


def test_a_hung_job_times_out_and_its_process_is_killed(task: Task, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.05, log_path=str(log))) as pool:
        started = time.monotonic()
        hung = pool.submit(standin_job(task, fault="hang", timeout_s=1.5))
        queued = pool.submit(standin_job(task, tag="behind"))
        result = hung.result(timeout=30)
        assert result.stage == "timeout" and "1.5 s" in result.reason
        assert 1.4 <= time.monotonic() - started < 15
        assert queued.result(timeout=30).correct, "the job queued behind the hang still runs"
    hung_entry = next(e for e in read_log(log) if e["fault"] == "hang")
    assert not pid_alive(hung_entry["pid"])


def test_an_evaluator_bug_is_reported_without_replacing_the_worker(task: Task, tmp_path: Path) -> None:
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.01)) as pool:
        first = pool.submit(standin_job(task)).result(timeout=30)
        bad = pool.submit(standin_job(task, fault="error")).result(timeout=30)
        after = pool.submit(standin_job(task, tag="x")).result(timeout=30)
        assert pool.stats().replaced_workers == 0
    assert bad.stage == "eval_error" and "simulated bug" in bad.reason
    assert after.extra["pool"]["worker_pid"] == first.extra["pool"]["worker_pid"]


def test_the_snapshot_is_taken_at_submit_time(task: Task, tmp_path: Path) -> None:
    from cuda_agent.workspace import create_workspace

    ws = create_workspace(task, tmp_path / "ws")
    spec = ws.root / "kernels" / "standin.json"
    spec.write_text(json.dumps({"seconds": 0.05}))
    job = EvalJob.create(task, ws.root)
    spec.write_text(json.dumps({"fault": "crash"}))
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator()) as pool:
        assert pool.submit(job).result(timeout=30).correct
        assert pool.submit(EvalJob.create(task, ws.root)).result(timeout=30).stage == "crashed"


def test_many_asyncio_clients(task: Task) -> None:
    async def main(pool: LocalPool) -> list[str]:
        results = await asyncio.gather(*(pool.aevaluate(standin_job(task, tag=str(i))) for i in range(32)))
        return [r.stage for r in results]

    with LocalPool(gpus=[0, 1, 2, 3], evaluator=StandInEvaluator(seconds=0.02)) as pool:
        assert asyncio.run(main(pool)) == ["timed"] * 32
        assert pool.stats().completed == 32


def test_close_cancels_or_finishes_and_refuses_new_jobs(task: Task) -> None:
    pool = LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.2))
    pool.wait_ready()
    futures = [pool.submit(standin_job(task, tag=str(i))) for i in range(5)]
    deadline = time.monotonic() + 10
    while pool.stats().running == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    pool.close(cancel_pending=True)
    outcomes = [f.exception(timeout=30) for f in futures]
    assert outcomes[0] is None, "the running job finishes"
    assert any(isinstance(o, PoolError) for o in outcomes[1:])
    with pytest.raises(PoolError, match="closed"):
        pool.submit(standin_job(task))


def test_bad_configuration_is_refused(task: Task) -> None:
    with pytest.raises(PoolError, match="distinct"):
        LocalPool(gpus=["0", "0"], evaluator=StandInEvaluator())
    with pytest.raises(PoolError, match="no GPU"):
        LocalPool(gpus=[], evaluator=StandInEvaluator())
    with pytest.raises(ConfigError, match="kind"):
        standin_job(task, kind="benchmark")
    with pytest.raises(ConfigError, match="relative"):
        EvalJob.create(task, {"../escape.py": "x"})
    with pytest.raises(ValueError, match="fault"):
        StandInEvaluator(fault="meltdown")


def test_a_full_queue_refuses_more_jobs(task: Task) -> None:
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.3), max_queue=2) as pool:
        pool.wait_ready()
        accepted = [pool.submit(standin_job(task, tag=str(i))) for i in range(2)]
        with pytest.raises(PoolError, match="queue is full"):
            for i in range(3):
                accepted.append(pool.submit(standin_job(task, tag=f"more-{i}")))
        assert all(f.result(timeout=30).correct for f in accepted)


def test_a_job_the_worker_cannot_run_ends_with_a_reason(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any exception while running a job (not just a dying worker) resolves it and replaces the worker."""
    from cuda_agent.pool.worker_process import WorkerProcess

    original, calls = WorkerProcess.run, []

    def flaky(self: WorkerProcess, job: EvalJob, timeout_s: float) -> object:
        calls.append(job.job_id)
        if len(calls) == 1:
            raise RuntimeError("injected failure")
        return original(self, job, timeout_s)

    monkeypatch.setattr(WorkerProcess, "run", flaky)
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.01)) as pool:
        bad = pool.submit(standin_job(task)).result(timeout=30)
        good = pool.submit(standin_job(task, tag="after")).result(timeout=30)
        stats = pool.stats()
    assert bad.stage == "eval_error" and "injected failure" in bad.reason and "replaced" in bad.reason
    assert good.correct and stats.replaced_workers == 1 and stats.workers == 1


def test_a_failing_slot_thread_is_replaced(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the slot thread itself: its job ends with a reason, a new slot takes the GPU, health counts it."""
    from cuda_agent.pool.base import JobBook

    original, calls = JobBook.running, []

    def broken_once(self: JobBook, delta: int) -> None:
        calls.append(delta)
        if len(calls) == 1:
            raise RuntimeError("injected slot bug")
        original(self, delta)

    monkeypatch.setattr(JobBook, "running", broken_once)
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.01)) as pool:
        bad = pool.submit(standin_job(task)).result(timeout=30)
        good = [pool.submit(standin_job(task, tag=str(i))).result(timeout=30) for i in range(3)]
        stats = pool.stats()
    assert bad.stage == "eval_error" and "injected slot bug" in bad.reason
    assert all(r.correct for r in good)
    assert stats.workers == 1 and stats.extra["slot_failures"] == 1 and "injected slot bug" in \
        stats.extra["last_slot_failure"]


def test_nan_and_infinite_time_limits_are_refused_at_submit(task: Task) -> None:
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.01)) as pool:
        for bad in (float("nan"), float("inf"), -1.0):
            with pytest.raises(ConfigError, match="finite"):
                pool.submit(standin_job(task, config={"timeout_s": bad}))
            with pytest.raises(ConfigError, match="finite"):
                standin_job(task, timeout_s=bad)
        assert pool.submit(standin_job(task)).result(timeout=30).correct


def test_a_jobs_outer_limit_leaves_room_for_the_judges_allowance(task: Task) -> None:
    """Without a limit of its own a job gets its config's candidate limit, the judge's allowance for its own first
    measurements of the task (`EvalConfig.judge_allowance_s`, which the judge adds to its deadline) and the grace:
    an outer limit without the allowance would cut the first evaluation of a task with slow baselines that the judge
    itself would finish."""
    from cuda_agent.evaluator import EvalConfig
    from cuda_agent.pool.base import TIMEOUT_GRACE_S

    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.01)) as pool:
        book = pool._book
        limit = book.timeout_for(standin_job(task, config={"timeout_s": 30}), None)
        assert limit == 30 + EvalConfig.judge_allowance_s + TIMEOUT_GRACE_S
        assert book.timeout_for(standin_job(task, config={"timeout_s": 30, "judge_allowance_s": 0}), None) == \
            30 + TIMEOUT_GRACE_S
        assert book.timeout_for(standin_job(task, config={"timeout_s": 30}, timeout_s=45), None) == 45
        with pytest.raises(ConfigError, match="judge_allowance_s"):
            pool.submit(standin_job(task, config={"timeout_s": 30, "judge_allowance_s": -5}))
