"""The evaluator on the largest inputs of the handwritten solutions (GPU host, about two minutes): L1/36_RMSNorm_
(7 GiB inputs) and L1/19_ReLU (6 GiB), each evaluated twice (cold, then warm) in strict mode.

Prints, per evaluation, the wall time, stage, reason, the last checks run, the notes (a skipped precision probe
says how much memory it found free) and the phase seconds. Written after an honest L1/36 kernel ran out of device
memory because tensors held in reference cycles outlived their phase; this is the check that they no longer do.

    PYTHONPATH=src python3 benchmarks/evaluator_large_tasks.py
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate  # noqa: E402

from evalcases import Case  # noqa: E402
from test_eval_gpu_cases import materialise  # noqa: E402

TASKS = (("L1_36_RMSNorm_", "L1/36_RMSNorm_"), ("L1_19_ReLU", "L1/19_ReLU"))


def main() -> int:
    failures = 0
    with tempfile.TemporaryDirectory() as tmp, WarmWorker() as worker:
        for name, spec in TASKS:
            case = Case(name, ROOT / "benchmarks" / "solutions" / name, spec, "strict", "correct")
            root = materialise(case, Path(tmp))
            for trip in ("cold", "warm"):
                t0 = time.perf_counter()
                r = evaluate(case.load_task(), root, EvalConfig(mode="strict", timeout_s=200), worker=worker)
                phases = {k: round(v, 3) for k, v in (r.extra.get("phase_seconds") or {}).items()}
                print(f"{spec} {trip}: {time.perf_counter() - t0:.2f} s, {r.stage} {r.reason[:300]}\n"
                      f"  checks {list(r.checks_run[-4:])}\n  notes {list(r.notes)}\n  phases {json.dumps(phases)}",
                      flush=True)
                failures += r.stage != "timed"
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
