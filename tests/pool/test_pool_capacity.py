"""Capacity tools of the pool benchmarks (benchmarks/capacity.py): interval unions, overlap detection, and a
closed-loop load run on a stand-in pool."""
from __future__ import annotations

import sys
from pathlib import Path

from cuda_agent.pool import JobTiming, LocalPool, StandInEvaluator
from cuda_agent.tasks import Task
from pool_helpers import standin_job

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' own helpers
import capacity  # noqa: E402
from capacity import busy_fraction, closed_loop, overlapping_jobs  # noqa: E402


def _t(job: str, gpu: str, start: float, end: float, status: str = "done") -> JobTiming:
    return JobTiming(job, "t", gpu, 1, start, start, end, "timed", status)


def test_busy_fraction_is_the_union_inside_the_window() -> None:
    timeline = [_t("a", "0", 0, 4), _t("b", "0", 3, 6), _t("c", "0", 8, 12), _t("d", "1", 0, 1),
                _t("e", "1", 2, 3, status="cached")]
    assert busy_fraction(timeline, (0, 10)) == {"0": 0.8, "1": 0.1}


def test_overlaps_are_found_even_behind_a_long_job() -> None:
    timeline = [_t("long", "0", 0, 10), _t("short", "0", 1, 2), _t("later", "0", 5, 6), _t("ok", "1", 5, 6),
                _t("next", "0", 10, 11)]
    assert overlapping_jobs(timeline) == [("0", "long", "short"), ("0", "long", "later")]


def test_closed_loop_counts_jobs_and_keeps_gpus_busy(task: Task) -> None:
    with LocalPool(gpus=["0", "1"], evaluator=StandInEvaluator(seconds=0.05)) as pool:
        pool.wait_ready()
        report = closed_loop(pool, lambda c, n: standin_job(task, tag=f"{c}-{n}"), clients=4, seconds=2.0)
        busy = busy_fraction(pool.timeline(), report.window)
        assert overlapping_jobs(pool.timeline()) == []
    assert report.stages == {"timed": report.completed}
    assert 40 <= report.completed <= 80, report
    assert set(busy) == {"0", "1"} and min(busy.values()) > 0.7


def test_the_benchmarks_stand_in_jobs_are_solutions_the_stand_in_scores_correct() -> None:
    """benchmarks/pool.py and pool_multigpu.py load a stand-in pool with these jobs: each a ModelNew (reward 1 from
    the stand-in, as from the real evaluator), each with an id of its own."""
    jobs = [capacity.standin_job(f"job {i}") for i in range(2)]
    assert jobs[0].job_id != jobs[1].job_id
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.0)) as pool:
        results = [pool.submit(job).result(timeout=60) for job in jobs]
    assert [(r.stage, r.reward) for r in results] == [("correct", 1), ("correct", 1)]
