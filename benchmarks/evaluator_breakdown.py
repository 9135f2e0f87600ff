"""Where the evaluator's round trip goes (GPU host, about a minute): phase seconds of warm round trips, then one
evaluation profiled in-process with cProfile (functions that read a device value absorb the device time queued
before them).

    PYTHONPATH=src python3 benchmarks/evaluator_breakdown.py [--trips 4] [--out DIR]

Prints the phases of every round trip and writes DIR/evaluator_breakdown.txt (phases and the cProfile tables).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from cuda_agent.evaluator import EvalConfig, EvalResult, WarmWorker  # noqa: E402

from evalcases import gpu_cases  # noqa: E402
from evaluator import describe, round_trips  # noqa: E402  (benchmarks/evaluator.py)
from test_eval_gpu_cases import materialise  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=4)
    parser.add_argument("--case", default="honest_relu_l1")
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory() as tmp:
        case = {c.name: c for c in gpu_cases()}[args.case]
        root = materialise(case, Path(tmp) / "ws")
        task = case.load_task()
        config = EvalConfig(mode="strict", timeout_s=300)
        with WarmWorker() as worker:
            round_trips(task, root, config, worker, args.trips, report=say)
        # in-process, so that cProfile sees the evaluation (a warm-up first fills this process's caches)
        from cuda_agent.evaluator.pipeline import run_job

        job = {"task": task.to_dict(), "solution": str(root), "config": config.to_dict()}
        run_job(job)
        profiler = cProfile.Profile()
        t0 = time.perf_counter()
        profiler.enable()
        out = run_job(job)
        profiler.disable()
        say(f"in-process {describe(EvalResult.from_dict(out), time.perf_counter() - t0)}")
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(profiler, stream=buf).sort_stats(key).print_stats(45)
            say(f"--- cProfile by {key}\n" + buf.getvalue())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "evaluator_breakdown.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
