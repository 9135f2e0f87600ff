"""Evaluator benchmark (GPU host, about 4 minutes): warm round trip, speedup stability, and the case catalogue.

Writes benchmarks/results/evaluator.json with:
  roundtrip_s           median seconds of 10 warm build + verify + profile round trips (L1/19_ReLU workspace)
  roundtrip_softmax_s   the same for 5 round trips of L1/23_Softmax, whose output is not bitwise the reference's
  speedup_cv            coefficient of variation of the speedup vs eager over those 10 evaluations of one kernel
  adversarial_rejected  cheats rejected with the rule they target (GPU workspaces + CPU single files)
  adversarial_total
  honest_accepted       honest candidates accepted (GPU workspaces timed + CPU single files)
  honest_total

Run: PYTHONPATH=src python3 benchmarks/evaluator.py
"""
from __future__ import annotations

import logging
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from cuda_agent.benchmarks_io import write_result  # noqa: E402
from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate  # noqa: E402

from evalcases import FAILURE_STAGES, Case, cpu_cases, gpu_cases  # noqa: E402
from test_eval_gpu_cases import materialise  # noqa: E402

log = logging.getLogger("benchmarks.evaluator")
ROUND_TRIPS = 10
SOFTMAX_TRIPS = 5


def _round_trips(task, root: Path, config: EvalConfig, worker: WarmWorker, n: int):
    """One cold evaluation (fills the build and baseline caches), then ``n`` timed warm ones."""
    first = evaluate(task, root, config, worker=worker)
    log.info("%s cold round trip: %.2f s (%s %s)", task.id, first.total_seconds or -1, first.stage, first.reason[:200])
    trips, speedups = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        result = evaluate(task, root, config, worker=worker)
        trips.append(time.perf_counter() - t0)
        if result.speedup_eager is not None:
            speedups.append(result.speedup_eager)
        phases = {k: round(v, 3) for k, v in (result.extra.get("phase_seconds") or {}).items()}
        log.info("%s round trip %.2f s: %s, speedup vs eager %s, phases %s", task.id, trips[-1], result.stage,
                 result.speedup_eager, phases)
    return first, trips, speedups, result


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import torch

    if not torch.cuda.is_available():
        log.error("benchmarks/evaluator.py needs a CUDA GPU")
        return 2
    started = time.perf_counter()
    details: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp, WarmWorker() as worker:
        tmp_path = Path(tmp)
        cases = {c.name: c for c in gpu_cases()}
        relu = cases["honest_relu_l1"]
        config = EvalConfig(mode="strict", timeout_s=300)
        first, trips, speedups, result = _round_trips(relu.load_task(), materialise(relu, tmp_path / "roundtrip"),
                                                      config, worker, ROUND_TRIPS)
        details["roundtrip_last"] = result.to_dict()
        mean = statistics.fmean(speedups) if speedups else math.nan
        cv = statistics.stdev(speedups) / mean if len(speedups) > 1 and mean > 0 else math.nan
        # The ReLU kernel's output is bitwise the reference's, which the comparison settles in one read; a softmax
        # kernel's is not, so its round trips time the full comparison.
        softmax = Case("L1_23_Softmax", ROOT / "benchmarks/solutions/L1_23_Softmax", "L1/23_Softmax", "strict",
                       "correct")
        _, softmax_trips, _, softmax_result = _round_trips(softmax.load_task(), materialise(softmax, tmp_path / "sm"),
                                                           config, worker, SOFTMAX_TRIPS)
        details["roundtrip_softmax_last"] = softmax_result.to_dict()

        counts = {"adversarial": 0, "honest": 0, "rejected": 0, "accepted": 0}
        outcomes: dict[str, str] = {}

        def record(label: str, case: object, res: object, honest_stage: str) -> None:
            honest_case = case.expect == "correct"
            ok = res.stage == honest_stage if honest_case else case.expect in res.rule_names
            outcomes[label] = f"{res.stage} {','.join(res.rule_names)}"
            counts["honest" if honest_case else "adversarial"] += 1
            counts["accepted" if honest_case else "rejected"] += ok
            log.info("%-28s %-4s %s %s%s", case.name, "ok" if ok else "MISS", res.stage, res.rule_names,
                     "" if ok else f": {res.reason[:300]} {res.log[-1500:]}")

        for case in gpu_cases():
            if case.expect in FAILURE_STAGES:
                continue
            ws = materialise(case, tmp_path / "cases")
            res = evaluate(case.load_task(), ws, EvalConfig(mode=case.mode, profile=case.profiled, reps=20,
                                                            warmup=3, timeout_s=300), worker=worker)
            record(f"gpu/{case.name}", case, res, "timed")
        for case in cpu_cases():
            res = evaluate(case.load_task(), case.solution, EvalConfig(mode=case.mode, profile=False, device="cpu",
                                                                       timeout_s=120), worker=worker)
            record(f"cpu/{case.name}", case, res, "correct")
        details["cases"] = outcomes
    metrics = {
        "roundtrip_s": statistics.median(trips),
        "roundtrip_cold_s": first.total_seconds or 0.0,
        "roundtrip_softmax_s": statistics.median(softmax_trips),
        "speedup_eager_mean": mean if math.isfinite(mean) else 0.0,
        "speedup_cv": cv if math.isfinite(cv) else -1.0,
        "adversarial_rejected": counts["rejected"],
        "adversarial_total": counts["adversarial"],
        "honest_accepted": counts["accepted"],
        "honest_total": counts["honest"],
        "benchmark_seconds": time.perf_counter() - started,
    }
    path = write_result("evaluator", metrics, command="PYTHONPATH=src python3 benchmarks/evaluator.py", extra=details)
    log.info("wrote %s: %s", path, metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
