"""Isolation: a candidate that crashes, hangs, raises or runs out of memory ends in a result with a clear stage,
through the warm fork server and through the plain spawn fallback; the caller survives."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate
from cuda_agent.evaluator.isolation import KILL_GRACE_S
from fault_probes.server import alive, cmdline
from cuda_agent.procs import descendants

from evalcases import cpu_cases

FAILURES = {c.name: c for c in cpu_cases(failures=True)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_becomes_result_in_warm_worker(name: str, warm_worker: WarmWorker) -> None:
    case = FAILURES[name]
    timeout = 8.0 if case.expect == "timeout" else 120.0
    task = case.load_task()  # (seconds on a loaded CPU: not the evaluation's time)
    start = time.perf_counter()
    result = evaluate(task, case.solution, EvalConfig(mode=case.mode, profile=False, timeout_s=timeout),
                      worker=warm_worker)
    assert result.stage == case.expect, (result.stage, result.reason, result.log[-1500:])
    assert not result.correct and result.reward == -1
    assert result.reason
    if case.expect == "timeout":
        assert time.perf_counter() - start < timeout + 20
    if case.expect == "crashed":
        assert "SIGSEGV" in result.reason
    assert warm_worker.alive  # the server outlives its children


def _status(pid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return dict(line.split(":\t", 1) for line in fh.read().splitlines() if ":\t" in line)
    except OSError:
        return {}


@pytest.mark.slow
def test_hang_is_killed_at_the_limit_and_leaves_no_process() -> None:
    """Through the spawn path (no warm worker, so no spare candidate processes): the judge reports the timeout at
    the limit, and neither it nor the candidate's sandboxed process survives."""
    case = FAILURES["hang"]
    task = case.load_task()  # (seconds on a loaded CPU: not the evaluation's time)
    seen: dict[int, str] = {}
    done = threading.Event()

    before = set(descendants(os.getpid()))  # other tests' workers (a warm worker fixture) are not this evaluation's

    def watch() -> None:  # every process the evaluation started (the judge's sandbox, the candidate's inside it)
        while not done.is_set():
            others = before | {d for pid in before for d in descendants(pid)}
            for pid in descendants(os.getpid()):
                if pid not in others:  # the latest command line (a fresh fork still shows its parent's)
                    seen[pid] = cmdline(pid) or seen.get(pid, "")
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.perf_counter()
    result = evaluate(task, case.solution, EvalConfig(mode="relaxed", profile=False, timeout_s=15))
    elapsed = time.perf_counter() - start
    done.set()
    watcher.join()
    assert result.stage == "timeout", (result.stage, result.reason)
    # the limit is the limit, plus the documented kill grace (and slack for a loaded 2-core CI machine)
    assert elapsed < 15 + KILL_GRACE_S + 10, elapsed
    assert any("judge_process" in line for line in seen.values()), "the judge's process was never seen"
    time.sleep(0.5)
    assert [pid for pid in seen if alive(pid)] == []  # the hung candidate's sandbox, every process of it, is gone


@pytest.mark.slow
def test_spawn_fallback_reports_crash_and_success() -> None:
    crash = FAILURES["crash_abort"]
    result = evaluate(crash.load_task(), crash.solution, EvalConfig(mode="relaxed", profile=False, timeout_s=120))
    assert result.stage == "crashed" and "SIGSEGV" in result.reason
    honest = [c for c in cpu_cases() if c.name == "honest_tiny_mean"][0]
    result = evaluate(honest.load_task(), honest.solution, EvalConfig(mode="relaxed", profile=False, timeout_s=120))
    assert result.stage == "correct" and result.correct


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_warm_worker_ends_when_its_owner_is_killed() -> None:
    """A pool or a test run killed with SIGKILL cannot stop its warm worker: the worker (and the judges and
    candidate processes under it) must notice on its own, or it lives on holding memory and, on a GPU host, a GPU."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    owner = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom cuda_agent.evaluator import WarmWorker\n"
                               "w = WarmWorker(); w.start(); print(w.pid, flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": src})
    try:
        server = int(owner.stdout.readline())
        assert _running(server)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 30
    while _running(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(server), "the warm worker outlived the process that started it"


_IGNORE_CHILDREN = """
import os, time
from cuda_agent.evaluator.judge_process import _ignore_children

def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"

ended = os.fork()
if ended == 0:
    os._exit(0)
while state(ended) != "Z":
    time.sleep(0.01)
later = os.fork()
if later == 0:
    time.sleep(0.5)
    os._exit(0)
_ignore_children()
time.sleep(1.5)
print(state(ended), state(later))
"""


def test_the_warm_server_reaps_children_that_ended_before_it_ignored_them() -> None:
    """The warm server, a subreaper, adopts its sandbox probe's bubblewrap init and only then ignores SIGCHLD; an
    init that had already exited stayed a zombie for the server's whole life (one warm worker in two, one zombie
    below `cuda-agent serve` per GPU). A child that ended before and one that ends after must both be gone."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run([sys.executable, "-c", _IGNORE_CHILDREN], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": src})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["gone", "gone"]


@pytest.mark.slow
def test_a_spare_process_that_died_before_the_evaluation_is_replaced(tmp_path: Path) -> None:
    """The judge adopts a spare candidate process started ahead of time; one that ended before any candidate code
    ran in it (seen on the H200: it died initialising CUDA while another candidate held the device's memory) is
    replaced by a new process, and the candidate is judged as usual, not scored out_of_memory."""
    import signal

    from cuda_agent.evaluator.api import evaluate_in_process
    from cuda_agent.evaluator.judge.candidate import make_spare, offer_spare

    case = next(c for c in cpu_cases() if c.name == "honest_tiny_mean")
    spare = make_spare(gpu=False)
    os.killpg(spare.pgid, signal.SIGKILL)
    offer_spare(spare)
    result = evaluate_in_process(case.load_task(), case.solution,
                                 EvalConfig(mode=case.mode, profile=False, timeout_s=120, device="cpu"))
    assert result.stage == "correct", (result.stage, result.reason, result.log[-1500:])
    assert any("spare candidate process had ended" in note for note in result.notes), result.notes
    assert not os.path.exists(spare.root)  # both processes' folders are removed


@pytest.mark.slow
def test_a_worker_with_no_spares_starts_no_candidate_process_ahead() -> None:
    """`WarmWorker(spares=0)`: nothing is started between evaluations (no spare initialising a device beside a
    timed evaluation); each evaluation starts its own candidate process, and is judged as usual. The default keeps
    spares started ahead."""
    case = next(c for c in cpu_cases() if c.name == "honest_tiny_mean")

    def runners(worker: WarmWorker) -> list[int]:
        return [p for p in descendants(worker.pid) if "ca_runner.boot" in cmdline(p)]

    with WarmWorker(spares=0) as worker:
        assert runners(worker) == []
        result = evaluate(case.load_task(), case.solution, EvalConfig(mode=case.mode, profile=False, timeout_s=120),
                          worker=worker)
        assert result.stage == "correct", (result.stage, result.reason)
        assert runners(worker) == []
    with WarmWorker() as worker:
        deadline = time.monotonic() + 60
        while len(runners(worker)) < 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert runners(worker)
    with pytest.raises(ValueError, match="spares"):
        WarmWorker(spares=-1)


@pytest.mark.slow
def test_a_result_says_where_its_wall_time_went(warm_worker: WarmWorker) -> None:
    """`extra["caller_seconds"]`: the caller's staging, the judge's fork answering, the result read and the whole
    wall time, in order, with the judge's own run (`total_seconds`) inside them: what benchmarks read to find the
    seconds an evaluation spends outside the judge's named phases; and `extra["judge_work_seconds"]`, the judge's
    own work in the calls phase by kind, and `extra["calibration_seconds"]`, the calibration phase by part."""
    case = next(c for c in cpu_cases() if c.name == "honest_tiny_mean")
    start = time.time()
    result = evaluate(case.load_task(), case.solution,
                      EvalConfig(mode=case.mode, profile=False, timeout_s=120, device="cpu"), worker=warm_worker)
    took = time.time() - start
    assert result.stage == "correct", (result.stage, result.reason, result.log[-1500:])
    seconds = result.extra["caller_seconds"]
    assert 0 <= seconds["stage"] <= seconds["wall"] <= took + 0.01
    assert 0 < seconds["forked"] <= seconds["answered"] <= seconds["wall"] - seconds["stage"] + 0.01
    # the judge's own run lies inside the caller's wait for it; it starts after the judge's pid is sent, but the
    # caller may read that line late on a loaded machine (seen: a 2-core CPU at full load), so ``forked`` is no bound
    assert 0 < result.total_seconds <= seconds["answered"] + 0.01
    # the judge's own work around the requests of the calls phase, by kind, within that phase
    work = result.extra["judge_work_seconds"]
    assert {"load_inputs", "request", "reference", "compare", "checks"} <= set(work), work
    assert all(v >= 0 for v in work.values())
    assert sum(work.values()) <= result.extra["phase_seconds"]["calls"] + 0.01
    # the calibration phase by part (no null requests: not timed)
    parts = result.extra["calibration_seconds"]
    assert {"sets", "precision", "reserve"} <= set(parts) and "null_host" not in parts, parts
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) <= result.extra["phase_seconds"]["calibration"] + 0.01
    # where the precision probe's kept calls went: on a CPU each is a copy, later ones written over in place
    stash = result.extra["probe_stash"]
    assert stash.get("copy", 0) >= 1 and set(stash) <= {"copy", "in_place"}, stash


SLOW_REFERENCE = '''import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(0.1)
        return x * 2.0


def get_inputs():
    return [torch.rand(64)]


def get_init_inputs():
    return []
'''

SLOW_CANDIDATE = '''import time
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(1.0)
        return x * 2.0
'''


@pytest.mark.slow
def test_a_timeout_after_the_judge_measured_baselines_is_the_judges(tmp_path: Path, warm_worker: WarmWorker) -> None:
    """The judge's first measurement of a task's baselines is its own work: where it took more than the judge's
    allowance (here none) and the candidate then ran out of time, the evaluation ends as ``eval_error`` with
    ``extra["evaluate_again"]`` (the baselines are cached), not as the candidate's ``timeout`` (-1). Seen on the
    H200: 166 s of a 180 s limit (L3/34). With the allowance the same candidate gets its whole limit, and its
    timeout is its own; a timeout with no baselines measured is the candidate's too
    (`test_hang_is_killed_at_the_limit_and_leaves_no_process`)."""
    from cuda_agent.tasks.loaders import load_task_file

    (tmp_path / "slow_task.py").write_text(SLOW_REFERENCE)
    (tmp_path / "slow_solution.py").write_text(SLOW_CANDIDATE)
    task = load_task_file(tmp_path / "slow_task.py", validate=False)
    config = EvalConfig(mode="relaxed", device="cpu", timeout_s=30, judge_allowance_s=0.0,
                        baseline_cache_dir=str(tmp_path / "baselines"))
    result = evaluate(task, tmp_path / "slow_solution.py", config, worker=warm_worker)
    assert result.stage == "eval_error", (result.stage, result.reason, result.log[-1500:])
    assert "baselines" in result.reason and "evaluate again" in result.reason
    assert result.extra["evaluate_again"] is True
    assert result.extra["phase_seconds"]["baselines"] > 1.0
    # the allowance: the baselines' seconds are the judge's, the candidate (1 s a call) runs out of its own 30 s
    allowed = evaluate(task, tmp_path / "slow_solution.py",
                       replace(config, judge_allowance_s=120.0, baseline_cache_dir=str(tmp_path / "fresh")),
                       worker=warm_worker)
    assert allowed.stage == "timeout" and "evaluate_again" not in allowed.extra, (allowed.stage, allowed.reason)


SLOW_TO_COMPILE_REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        for i in range(800):  # eager: milliseconds; torch.compile: 20-50 s to compile on a 2-core CPU
            x = torch.tanh(x * 1.001 + 0.001 * i)
        return x


def get_inputs():
    return [torch.rand(256)]


def get_init_inputs():
    return []
'''

SAME_IN_PYTORCH = SLOW_TO_COMPILE_REFERENCE.replace("class Model(", "class ModelNew(")


@pytest.mark.slow
def test_the_judges_first_baselines_do_not_use_the_candidates_time(tmp_path: Path, warm_worker: WarmWorker) -> None:
    """Baselines that take longer than the candidate's whole limit (torch.compile of a long chain: 20-50 s on a
    2-core CPU, limit 12 s) on the task's first evaluation: the judge adds them to the deadline, within
    `EvalConfig.judge_allowance_s`, and an honest candidate is judged in full. Measured here before the allowance:
    the process was killed at the limit while the judge measured, and the candidate scored ``timeout`` (-1)."""
    from cuda_agent.tasks.loaders import load_task_file

    (tmp_path / "task.py").write_text(SLOW_TO_COMPILE_REFERENCE)
    (tmp_path / "solution.py").write_text(SAME_IN_PYTORCH)
    task = load_task_file(tmp_path / "task.py", validate=False)
    config = EvalConfig(mode="relaxed", device="cpu", timeout_s=12, baseline_cache_dir=str(tmp_path / "baselines"))
    result = evaluate(task, tmp_path / "solution.py", config, worker=warm_worker)
    assert result.stage == "timed" and result.reward == 1, (result.stage, result.reason, result.log[-1500:])
    assert result.extra["phase_seconds"]["baselines"] > config.timeout_s  # the judge's work went past the limit
    assert result.total_seconds <= config.hard_limit_s
