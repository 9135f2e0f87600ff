"""Kill a real process in the middle of a run (SIGKILL): no finished result is lost, and the run resumes where it
stopped without evaluating a finished job again."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cuda_agent.store import DONE, Store

SRC = str(Path(__file__).resolve().parents[2] / "src")
N_JOBS = 12

_RUNNER = """
import sys
from cuda_agent.pool import EvalJob, LocalPool, StandInEvaluator
from cuda_agent.pool.runs import resume_run, run_jobs
from cuda_agent.store import Store
from cuda_agent.tasks import Task

url, log_path, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = Store.open(url)
pool = LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.25, log_path=log_path), store=store)
task = Task(id="crash/relu", code="class Model: pass\\n")
if mode == "start":
    jobs = [EvalJob.create(task, {"model_new.py": f"# variant {i}\\nclass ModelNew: pass\\n"}, job_id=f"job-{i:02d}")
            for i in range(n)]
    run_jobs(pool, jobs, store=store, run_id="run-1")
else:
    results = resume_run(pool, store=store, run_id="run-1")
    assert len(results) == n and all(r.correct for r in results.values())
pool.close()
store.close()
"""


def _spawn(url: str, log: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", _RUNNER, url, str(log), mode, str(N_JOBS)], env=env,
                            stderr=subprocess.PIPE, text=True)


def _done_ids(url: str) -> list[str]:
    with Store.open(url) as store:
        return [r.job_id for r in store.records(run_id="run-1") if r.status == DONE]


@pytest.mark.slow
def test_sigkill_mid_run_then_resume(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    log = tmp_path / "standin.jsonl"
    Store.open(url).close()
    proc = _spawn(url, log, "start")
    deadline = time.monotonic() + 120
    while len(_done_ids(url)) < 4:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    finished_before = set(_done_ids(url))
    assert 4 <= len(finished_before) < N_JOBS
    ran_before = [json.loads(line) for line in log.read_text().splitlines()]
    time.sleep(0.5)
    for pid in {e["pid"] for e in ran_before}:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3], \
            "the GPU worker died with its pool (no orphan holds the GPU)"

    resumed = _spawn(url, log, "resume")
    _, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err

    entries = [json.loads(line) for line in log.read_text().splitlines()]
    ran_after = {e["job_id"] for e in entries[len(ran_before):]}
    with Store.open(url) as store:
        progress = store.run_progress("run-1")
        done_per_job = Counter(r.job_id for r in store.records(run_id="run-1") if r.status == DONE)
        ids = {job.job_id: job.cache_key for job in store.run_jobs("run-1")}
    assert progress.complete and progress.total == N_JOBS
    assert set(done_per_job) == set(ids) and set(done_per_job.values()) == {1}, "each job stored exactly once"
    assert not ran_after & finished_before, "a finished job was evaluated again"
    assert ran_after == set(ids) - finished_before
