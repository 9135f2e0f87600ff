"""The GPU pool on N GPUs of one host (issue 9): no two evaluations overlap on a GPU, and throughput scales.

Runs a batch of level-1 KernelBench tasks with real solutions (folders named ``L1_<task name>`` under
--solutions, as in benchmarks/solutions) through `LocalPool`: first on one GPU, then on all N, each as a closed
loop (2 clients per GPU keep every queue full) of --seconds after a warm-up (one evaluation per task, which also
fills the evaluator's baseline cache, and one per GPU). Writes benchmarks/results/pool_multigpu.json:

- ``gpus``: N;
- ``evals_per_minute``: throughput on N GPUs; ``evals_per_minute_1_gpu``: on one;
- ``scaling_over_n``: evals_per_minute / (N x evals_per_minute_1_gpu) (goal >= 0.9);
- ``overlapping_pairs``: pairs of evaluations whose worker intervals overlap on one GPU (must be 0), from the
  workers' timestamps; ``gpus_used``; ``min_gpu_busy_fraction``.

About 5 to 7 minutes on a host of 8 H200s (warm-up included); needs N >= 2 GPUs.

    PYTHONPATH=src python3 benchmarks/pool_multigpu.py [--seconds 60] [--max-tasks 4] [--solutions benchmarks/solutions]

Dry run on a CPU with stand-in work (writes nothing): ``--standin 0.5 --fake-gpus 4``.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks_io import write_result
from cuda_agent.pool import EvalJob, LocalPool, RealEvaluator, StandInEvaluator, detect_gpus
from capacity import busy_fraction, closed_loop, overlapping_jobs, standin_job


def _batch(solutions: Path, max_tasks: int) -> list[EvalJob]:
    from cuda_agent.tasks import load_kernelbench_dir
    from cuda_agent.locations import kernelbench_root

    root = kernelbench_root()
    if root is None:
        raise SystemExit("KernelBench data not found: set CUDA_AGENT_KERNELBENCH to the folder holding level1/")
    by_name = {task.name: task for task in load_kernelbench_dir(root, levels=[1])}
    jobs = []
    for folder in sorted(solutions.glob("L1_*")):
        task = by_name.get(folder.name[len("L1_"):])
        if task is not None and (folder / "model_new.py").is_file():
            jobs.append(EvalJob.create(task, folder, kind="full"))
    if not jobs:
        raise SystemExit(f"no level-1 solutions (folders L1_<task name> with model_new.py) under {solutions}")
    return jobs[:max_tasks]


def _standin_batch(count: int) -> list[EvalJob]:
    return [standin_job(f"job {i}") for i in range(count)]


def _phase(gpus: list[str], evaluator: Any, batch: list[EvalJob], seconds: float) -> dict[str, Any]:
    def make(client: int, n: int) -> EvalJob:
        template = batch[(client + n) % len(batch)]
        return EvalJob(template.task, template.solution, template.config, template.kind)

    started = time.monotonic()
    with LocalPool(gpus, evaluator=evaluator) as pool:
        pool.wait_ready()
        warm = [pool.submit(make(i, 0)) for i in range(max(len(batch), len(gpus)))]
        stages = [f.result().stage for f in warm]
        print(f"  {len(gpus)} GPU(s) ready and warm in {time.monotonic() - started:.0f} s (warm-up stages {stages})")
        report = closed_loop(pool, make, clients=2 * len(gpus), seconds=seconds)
        timeline = pool.timeline()
    window = [t for t in timeline if t.started >= report.window[0]]
    busy = busy_fraction(timeline, report.window)
    return {"report": report, "overlaps": overlapping_jobs(timeline), "gpus_used": len({t.gpu for t in window}),
            "min_busy": min(busy.values()) if busy else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each phase's measured closed loop")
    parser.add_argument("--max-tasks", type=int, default=4, help="level-1 tasks in the batch")
    parser.add_argument("--solutions", type=Path, default=Path("benchmarks/solutions"))
    parser.add_argument("--standin", type=float, default=None, help="dry run: stand-in jobs of this many seconds")
    parser.add_argument("--fake-gpus", type=int, default=4, help="dry run: how many GPU labels")
    args = parser.parse_args()

    if args.standin is not None:
        gpus = [str(i) for i in range(args.fake_gpus)]
        evaluator: Any = StandInEvaluator(seconds=args.standin)
        batch = _standin_batch(args.max_tasks)
    else:
        gpus = detect_gpus()
        if len(gpus) < 2:
            print(f"pool_multigpu needs a host with 2 or more GPUs; found {len(gpus)}", file=sys.stderr)
            return 2
        evaluator = RealEvaluator()
        batch = _batch(args.solutions, args.max_tasks)
    print(f"batch: {[job.task.id for job in batch]}; GPUs: {gpus}")

    print("phase 1: one GPU")
    one = _phase(gpus[:1], evaluator, batch, args.seconds)
    print(f"  {one['report'].completed} evaluations, {one['report'].per_minute:.1f}/min, stages {one['report'].stages}")
    print(f"phase 2: {len(gpus)} GPUs")
    many = _phase(gpus, evaluator, batch, args.seconds)
    print(f"  {many['report'].completed} evaluations, {many['report'].per_minute:.1f}/min, stages "
          f"{many['report'].stages}")
    scaling = many["report"].per_minute / (len(gpus) * one["report"].per_minute)
    overlaps = len(one["overlaps"]) + len(many["overlaps"])
    print(f"scaling_over_n = {scaling:.3f} (goal >= 0.9); overlapping pairs {overlaps} (must be 0); GPUs used "
          f"{many['gpus_used']}/{len(gpus)}; least busy GPU {many['min_busy']:.3f}")
    metrics = {
        "gpus": len(gpus),
        "evals_per_minute": round(many["report"].per_minute, 2),
        "evals_per_minute_1_gpu": round(one["report"].per_minute, 2),
        "scaling_over_n": round(scaling, 4),
        "overlapping_pairs": overlaps,
        "gpus_used": many["gpus_used"],
        "min_gpu_busy_fraction": round(many["min_busy"], 4),
        "seconds_per_phase": args.seconds,
    }
    if args.standin is not None:
        print(f"dry run (stand-in): nothing written; metrics would be {metrics}")
        return 0
    details = {"tasks": [job.task.id for job in batch], "stages_n_gpus": many["report"].stages,
               "stages_1_gpu": one["report"].stages,
               "overlap_check": "worker start/end timestamps per GPU from LocalPool.timeline()"}
    command = " ".join(shlex.quote(a) for a in ["python3", "benchmarks/pool_multigpu.py", *sys.argv[1:]])
    path = write_result("pool_multigpu", metrics, command=command, extra=details)
    print(f"wrote {path}")
    return 0 if overlaps == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
