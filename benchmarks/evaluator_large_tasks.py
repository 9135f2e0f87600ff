"""The evaluator on the largest inputs of the handwritten solutions (GPU host, about two minutes): L1/36_RMSNorm_
(7 GiB inputs) and L1/19_ReLU (6 GiB), each evaluated twice (cold, then warm) in strict mode.

Prints, per evaluation, the wall time, stage, reason, the notes (a skipped precision probe says how much memory it
found free) and the phase seconds. Written after an honest L1/36 kernel ran out of device memory because tensors
held in reference cycles outlived their phase; this is the check that they no longer do.

    PYTHONPATH=src python3 benchmarks/evaluator_large_tasks.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from cuda_agent.evaluator import EvalConfig, WarmWorker  # noqa: E402

from evalcases import solution_case  # noqa: E402
from evaluator import round_trips  # noqa: E402  (benchmarks/evaluator.py)
from test_eval_gpu_cases import materialise  # noqa: E402

TASKS = ("L1/36_RMSNorm_", "L1/19_ReLU")


def main() -> int:
    failures = 0
    with tempfile.TemporaryDirectory() as tmp, WarmWorker() as worker:
        for spec in TASKS:
            case = solution_case(spec)
            first, _, _, last = round_trips(case.load_task(), materialise(case, Path(tmp)),
                                            EvalConfig(mode="strict", timeout_s=200), worker, 1,
                                            report=lambda line: print(line, flush=True))
            failures += (first.stage != "timed") + (last.stage != "timed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
