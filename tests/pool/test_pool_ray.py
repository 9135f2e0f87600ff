"""RayPool on a real local Ray session with four declared (fake) GPUs and stand-in GPU work.

One Ray session for the whole module: starting Ray is the slow part.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from pool_helpers import overlapping_pairs, read_log, standin_job

from cuda_agent.pool import StandInEvaluator
from cuda_agent.tasks import Task

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    ray.init(num_cpus=2, num_gpus=4, resources={"eval_gpu": 2}, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pool_and_log(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    from cuda_agent.pool.ray_pool import RayPool

    log = tmp_path_factory.mktemp("ray") / "runs.jsonl"
    pool = RayPool(evaluator=StandInEvaluator(seconds=0.1, log_path=str(log)), eval_timeout_s=20,
                   build_arch="90")
    pool.wait_ready(timeout_s=180)
    yield pool, log
    pool.close()


def test_actors_hold_one_gpu_each_and_never_overlap(pool_and_log: tuple[Any, Path], task: Task) -> None:
    pool, log = pool_and_log
    assert len(pool.gpus) == 4 and len({g.split(":")[1] for g in pool.gpus}) == 4
    jobs = [standin_job(task, tag=f"ray-{i}") for i in range(24)]
    started = time.monotonic()
    results = [f.result(timeout=120) for f in [pool.submit(job) for job in jobs]]
    elapsed = time.monotonic() - started
    assert all(r.correct for r in results)
    entries = [e for e in read_log(log) if e["job_id"] in {j.job_id for j in jobs}]
    assert len(entries) == 24 and overlapping_pairs(entries) == []
    assert {e["gpu"] for e in entries} == {"0", "1", "2", "3"}
    assert elapsed < 24 * 0.1 + 5, "jobs ran in parallel across the four actors"


def test_faults_are_reported_and_workers_replaced(pool_and_log: tuple[Any, Path], task: Task) -> None:
    pool, _ = pool_and_log
    crash = pool.submit(standin_job(task, fault="crash"))
    hang = pool.submit(standin_job(task, fault="hang", timeout_s=1.5))
    broken = pool.submit(standin_job(task, fault="broken"))
    assert crash.result(timeout=120).stage == "crashed"
    assert hang.result(timeout=120).stage == "timeout"
    assert "illegal memory access" in broken.result(timeout=120).reason
    after = [pool.submit(standin_job(task, tag=f"after-{i}")) for i in range(8)]
    assert all(f.result(timeout=120).correct for f in after)
    assert pool.stats().replaced_workers >= 3


def test_a_killed_actor_fails_its_job_and_is_replaced(pool_and_log: tuple[Any, Path], task: Task) -> None:
    pool, log = pool_and_log
    job = standin_job(task, seconds=30, tag="victim")
    future = pool.submit(job)
    deadline = time.monotonic() + 60
    while pool.actor_running(job.job_id) is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    ray.kill(pool.actor_running(job.job_id), no_restart=True)
    result = future.result(timeout=120)
    assert result.stage == "crashed" and "actor" in result.reason
    assert pool.submit(standin_job(task, tag="after-kill")).result(timeout=180).correct


def test_many_asyncio_clients(pool_and_log: tuple[Any, Path], task: Task) -> None:
    pool, _ = pool_and_log

    async def main() -> list[bool]:
        results = await asyncio.gather(*(pool.aevaluate(standin_job(task, seconds=0.02, tag=f"as-{i}"))
                                         for i in range(32)))
        return [r.correct for r in results]

    assert asyncio.run(main()) == [True] * 32


def test_builds_run_as_cpu_tasks(pool_and_log: tuple[Any, Path], task: Task, tmp_path: Path) -> None:
    from cuda_agent.workspace import create_workspace

    pool, _ = pool_and_log
    ws = create_workspace(task, tmp_path / "ws")
    result = pool.submit_build(ws.root).result(timeout=120)
    assert not result.ok and "no kernel sources" in result.diagnostics


def test_inside_a_ray_actor_the_pool_takes_only_the_gpus_it_is_given(ray_session: None) -> None:
    """Inside a training job's Ray worker (a verl agent-loop worker is an actor) the default, every GPU of the
    cluster, would take the training GPUs: the pool refuses it, honours num_gpus and gpu_resources, and refuses to
    join a second cluster."""

    @ray.remote(num_cpus=0)
    class Worker:
        def make(self, **kwargs: Any) -> str | int:
            from cuda_agent.pool.ray_pool import RayPool

            try:
                pool = RayPool(evaluator=StandInEvaluator(seconds=0.01), **kwargs)
            except Exception as exc:  # the message is what the test checks
                return f"{type(exc).__name__}: {exc}"
            actors = pool.actors()
            pool.close(wait=False)  # its actors may wait for GPUs the module's pool holds: end them here
            for actor in actors:
                ray.kill(actor)
            return len(actors)

    worker = Worker.remote()
    refused = ray.get(worker.make.remote(), timeout=120)
    assert refused.startswith("ConfigError: RayPool inside a Ray actor") and "num_gpus or gpu_resources" in refused
    assert ray.get(worker.make.remote(num_gpus=1), timeout=120) == 1
    assert ray.get(worker.make.remote(gpu_resources={"eval_gpu": 1}), timeout=120) == 2  # the eval nodes' share
    other = ray.get(worker.make.remote(address="203.0.113.9:6379", num_gpus=1), timeout=120)
    assert other.startswith("ConfigError: this process is already in the Ray cluster") and "kind http" in other
    assert ray.get(worker.make.remote(address="auto", num_gpus=2), timeout=120) == 2
    ray.kill(worker)
