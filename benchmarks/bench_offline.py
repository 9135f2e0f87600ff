"""Offline benchmark (GPU host, <= 6 minutes): score the handwritten solutions in benchmarks/solutions/ with the real
evaluator through a LocalPool, and write

- benchmarks/results/bench_offline.json: tasks, pass_rate, faster_than_compile_rate, geomean_speedup_vs_compile
  (and the per-level numbers and each task's result under "details");
- benchmarks/reports/offline/: report.md, report.html, metrics.json, results.json and the figures.

Run from the repository root:  PYTHONPATH=src python3 benchmarks/bench_offline.py [--budget-s 330]

The task set is the tasks that have a solution (KernelBench levels 1-3 from ../shared/kernelbench or
$CUDA_AGENT_KERNELBENCH). Tasks are evaluated one after another within the time budget; any task not reached
counts as a failure, and the summary says how many were not reached.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from cuda_agent.bench import MetricsConfig, compute_metrics
from cuda_agent.bench.offline import find_solutions, run_offline
from cuda_agent.bench.outcome import TaskOutcome
from cuda_agent.bench.report_pages import write_report
from cuda_agent.bench.results import BenchResults, save_results
from benchmarks_io import write_result
from cuda_agent.tasks import load_kernelbench_dir
from cuda_agent.locations import kernelbench_root

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "benchmarks" / "solutions"
REPORT_DIR = REPO / "benchmarks" / "reports" / "offline"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=330.0, help="stop starting new tasks after this long")
    parser.add_argument("--store", default=None, help="store URL (default: a fresh SQLite file in a temp folder)")
    parser.add_argument("--mode", default="strict", help="evaluator mode: strict or relaxed")
    parser.add_argument("--standin", action="store_true",
                        help="dry run without a GPU (stand-in evaluator); writes under a temp folder, not benchmarks/")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("cuda_agent.bench.offline").setLevel(logging.ERROR)  # one task at a time: the rest "unmatched"

    root = kernelbench_root()
    if root is None:
        print("KernelBench tasks not found: set CUDA_AGENT_KERNELBENCH", file=sys.stderr)
        return 2
    from cuda_agent.evaluator.config import EvalConfig
    from cuda_agent.pool import LocalPool, StandInEvaluator
    from cuda_agent.store import Store

    all_tasks = load_kernelbench_dir(root, validate=False)
    found, unmatched = find_solutions(SOLUTIONS, all_tasks)
    tasks = all_tasks.filter(ids=sorted(found))
    print(f"{len(tasks)} solved tasks ({', '.join(t.id for t in tasks)}); unmatched: {unmatched or 'none'}")

    start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="bench-offline-")
    store = Store.open(args.store or f"sqlite:///{tmp}/store.db")
    report_dir = Path(tmp) / "reports" if args.standin else REPORT_DIR
    if args.standin:
        os.environ["CUDA_AGENT_RESULTS_DIR"] = str(Path(tmp) / "results")
        pool = LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.05), store=store)
        config = None
    else:
        pool = LocalPool(store=store)
        config = EvalConfig(mode=args.mode)
    outcomes: list[TaskOutcome] = []
    not_reached: list[str] = []
    try:
        for task in tasks:
            if time.monotonic() - start > args.budget_s:
                not_reached.append(task.id)
                continue
            t0 = time.monotonic()
            run = run_offline(tasks.filter(ids=[task.id]), SOLUTIONS, pool=pool, store=store, run_id=f"offline/{task.id}",
                              config=config, name="handwritten solutions")
            outcome = run.results.outcomes[0]
            outcomes.append(outcome)
            speed = (f"{outcome.speedup_vs_eager:.2f}x eager, {outcome.speedup_vs_compile:.2f}x compile"
                     if outcome.speedup_vs_compile else outcome.error[:160])
            print(f"  {task.id:45s} {outcome.stage:15s} {speed}  ({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        pool.close()

    results = BenchResults.build("handwritten solutions (benchmarks/solutions)", {t.id: t.level for t in tasks},
                                 outcomes, {"mode": args.mode, "gpu": pool.gpu_name, "not_reached": len(not_reached)})
    report_dir.mkdir(parents=True, exist_ok=True)
    save_results(results, report_dir / "results.json")
    write_report(results, report_dir, link_base=SOLUTIONS)
    metrics = compute_metrics(results.outcomes, results.tasks, MetricsConfig())
    overall = metrics.overall
    flat = {
        "tasks": overall.tasks,
        "correct": overall.correct,
        "pass_rate": overall.pass_rate,
        "faster_than_eager_rate": overall.faster_than_eager_rate,
        "faster_than_compile_rate": overall.faster_than_compile_rate,
        "geomean_speedup_vs_eager": overall.geomean_speedup_vs_eager or 0.0,
        "geomean_speedup_vs_compile": overall.geomean_speedup_vs_compile or 0.0,
        "not_reached": len(not_reached),
        "wall_s": time.monotonic() - start,
    }
    for group in metrics.levels:
        flat[f"level{group.level}_pass_rate"] = group.pass_rate
        flat[f"level{group.level}_faster_than_compile_rate"] = group.faster_than_compile_rate
        flat[f"level{group.level}_geomean_speedup_vs_compile"] = group.geomean_speedup_vs_compile or 0.0
    details = {"outcomes": [o.to_dict() for o in results.outcomes], "not_reached": not_reached,
               "note": "geomeans are 0.0 where no kernel was correct and timed"}
    path = write_result("bench_offline", flat, command="PYTHONPATH=src python3 benchmarks/bench_offline.py",
                        extra=details)
    print(f"pass rate {100 * overall.pass_rate:.1f}% ({overall.correct}/{overall.tasks}); faster than compile "
          f"{100 * overall.faster_than_compile_rate:.1f}%; geomean vs compile "
          f"{overall.geomean_speedup_vs_compile or 0.0:.2f}x; {len(not_reached)} not reached; "
          f"{flat['wall_s']:.0f} s. Wrote {path} and {report_dir}/report.md, report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
