"""Capacity planning: drive a pool with a closed loop of clients and measure throughput, GPU occupancy and
exclusivity from the workers' own timestamps (used by benchmarks/pool.py and benchmarks/pool_multigpu.py)."""
from __future__ import annotations

import threading
from concurrent.futures import TimeoutError as FutureTimeout
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from cuda_agent.pool.base import JobTiming
from cuda_agent.pool.job import EvalJob
from cuda_agent.tasks import Task


STANDIN_TASK = Task(id="bench/standin", code="# stand-in task\n")


def standin_job(label: str) -> EvalJob:
    """A job for a pool of stand-in evaluators: a ``ModelNew`` in PyTorch, which the stand-in scores ``correct``
    (reward 1) as the real evaluator would such a solution; ``label`` makes each job's text, and so its id, its own."""
    return EvalJob.create(STANDIN_TASK, {"model_new.py": f"# {label}\nimport torch\n\n\nclass ModelNew(torch.nn.Module):"
                                                         f"\n    def forward(self, x):\n        return x\n"})


@dataclass(frozen=True)
class LoadReport:
    """What a closed-loop load run measured.

    Attributes:
        clients: concurrent clients (each waits for its result before submitting the next job).
        seconds: the measurement window.
        completed: jobs that finished inside the window.
        per_minute: completed jobs per minute, over the time from the start to the last completion inside the
            window (not the whole window: counting whole jobs in a fixed window undercounts slow pools by up to
            one job per worker).
        stages: how many results ended in each stage.
        window: (start, end) of the window, ``time.time()`` clock (the workers' clock).
    """

    clients: int
    seconds: float
    completed: int
    per_minute: float
    stages: dict[str, int]
    window: tuple[float, float]


def closed_loop(pool: Any, make_job: Callable[[int, int], EvalJob], *, clients: int, seconds: float,
                progress: Callable[[int], None] | None = None, drain: bool = True) -> LoadReport:
    """Run ``clients`` threads that each submit ``make_job(client, n)`` and wait for it, for ``seconds``.

    Jobs still running at the end are not counted; with ``drain`` they are waited for, without it the clients stop
    waiting when the window closes (with many clients on few GPUs the queue holds minutes of work by then: close
    the pool with ``cancel_pending=True`` afterwards)."""
    start = time.time()
    end = start + seconds
    lock = threading.Lock()
    finished: list[tuple[float, str]] = []

    def client(index: int) -> None:
        n = 0
        while time.time() < end:
            future = pool.submit(make_job(index, n))
            n += 1
            if drain:
                result = future.result()
            else:
                try:
                    result = future.result(timeout=max(0.05, end - time.time()))
                except FutureTimeout:
                    return
            with lock:
                finished.append((time.time(), result.stage))
                if progress:
                    progress(len(finished))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(None if drain else max(0.0, end - time.time()) + 5.0)
    inside = [(t, stage) for t, stage in finished if t <= end]
    stages: dict[str, int] = defaultdict(int)
    for _, stage in inside:
        stages[stage] += 1
    span = (max(t for t, _ in inside) - start) if inside else seconds
    return LoadReport(clients, seconds, len(inside), 60.0 * len(inside) / span, dict(stages), (start, end))


def _union_length(intervals: Iterable[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def busy_fraction(timeline: Iterable[JobTiming], window: tuple[float, float]) -> dict[str, float]:
    """Per GPU: the union of its evaluation intervals (worker start to worker end) inside ``window``, over the
    window's length. Cached results (no GPU used) are left out."""
    start, end = window
    by_gpu: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for timing in timeline:
        if timing.status == "cached":
            continue
        a, b = max(timing.started, start), min(timing.finished, end)
        if b > a:
            by_gpu[timing.gpu].append((a, b))
        else:
            by_gpu.setdefault(timing.gpu, [])
    return {gpu: _union_length(spans) / (end - start) for gpu, spans in by_gpu.items()}


def overlapping_jobs(timeline: Iterable[JobTiming]) -> list[tuple[str, str, str]]:
    """(gpu, job a, job b) for every pair of evaluations whose worker intervals overlap on one GPU: must be empty."""
    by_gpu: dict[str, list[JobTiming]] = defaultdict(list)
    for timing in timeline:
        if timing.status != "cached":
            by_gpu[timing.gpu].append(timing)
    clashes = []
    for gpu, runs in by_gpu.items():
        runs.sort(key=lambda t: t.started)
        latest_end, latest_id = float("-inf"), ""
        for timing in runs:
            if timing.started < latest_end:
                clashes.append((gpu, latest_id, timing.job_id))
            if timing.finished > latest_end:
                latest_end, latest_id = timing.finished, timing.job_id
    return clashes


class GpuUtilSampler:
    """Samples ``nvidia-smi`` GPU utilisation (percent of time a kernel ran) in a background thread."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.samples: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpu-util-sampler")

    def _run(self) -> None:
        import subprocess

        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10)
                values = [float(v) for v in out.stdout.split() if v.strip()]
                if values:
                    self.samples.append(values)
            except (OSError, ValueError, subprocess.SubprocessError):
                pass
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "GpuUtilSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def mean(self, gpu_index: int = 0) -> float | None:
        values = [s[gpu_index] for s in self.samples if len(s) > gpu_index]
        return sum(values) / len(values) / 100.0 if values else None
