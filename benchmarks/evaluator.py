"""Evaluator benchmark (GPU host, about 4 minutes): warm round trip, speedup stability, and the case catalogue.

Writes benchmarks/results/evaluator.json with:
  roundtrip_s           median seconds of 10 warm build + verify + profile round trips (L1/19_ReLU workspace)
  roundtrip_softmax_s   the same for 5 round trips of L1/23_Softmax, whose output is not bitwise the reference's
  speedup_cv            coefficient of variation of the speedup vs eager over those 10 evaluations of one kernel
  speedup_cv_uncorrected  the same for cached eager time / candidate time, i.e. without the drift correction
                        (eager PyTorch timed again on the candidate's inputs; EvalConfig.baseline_drift_limit)
  adversarial_total, adversarial_rejected, adversarial_as_expected, native_adversarial_total,
  native_adversarial_rejected, host_read_attempts, host_reads_blocked
                        the adversarial corpus (tests/evaluator/cases/adversarial, GPU and CPU cases), counted as
                        benchmarks/adversarial.py counts it
  honest_accepted       honest candidates accepted (GPU workspaces timed + CPU single files)
  honest_total

Run: PYTHONPATH=src python3 benchmarks/evaluator.py
"""
from __future__ import annotations

import json
import logging
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cuda_agent.benchmarks_io import write_result  # noqa: E402
from cuda_agent.evaluator import EvalConfig, EvalResult, WarmWorker, evaluate  # noqa: E402

from adversarial import run_corpus  # noqa: E402
from adversarial_corpus import adversarial_cases, tally  # noqa: E402
from evalcases import cpu_cases, gpu_cases, solution_case  # noqa: E402
from test_eval_gpu_cases import materialise  # noqa: E402

log = logging.getLogger("benchmarks.evaluator")
ROUND_TRIPS = 10
SOFTMAX_TRIPS = 5


def describe(result: EvalResult, wall_s: float) -> str:
    """One evaluation on one line: wall time, stage, speedup, times, drift, verify and profile seconds, notes,
    phase seconds."""
    phases = {k: round(v, 3) for k, v in (result.extra.get("phase_seconds") or {}).items()}
    times = {name: round(stats.median_ms, 4) for name in ("candidate", "eager", "eager_paired")
             if (stats := getattr(result, name)) is not None}
    return (f"{wall_s:.2f} s: {result.stage} {result.reason[:200]}, speedup vs eager {result.speedup_eager}, "
            f"median ms {times}, drift {result.baseline_drift}, "
            f"verify {result.verify_seconds or 0:.2f} s, profile {result.profile_seconds or 0:.2f} s, "
            f"sets {result.input_sets_checked}, notes {list(result.notes)}, phases {json.dumps(phases)}")


def round_trips(task, root: Path, config: EvalConfig, worker: WarmWorker, n: int,
                report: Callable[[str], None] = log.info):
    """One cold evaluation (fills the build and baseline caches), then ``n`` warm ones, each described to ``report``;
    returns (the cold result, the warm wall times, the warm results, the last result)."""
    trips: list[float] = []
    warm: list[EvalResult] = []
    first = result = None
    for i in range(n + 1):
        t0 = time.perf_counter()
        result = evaluate(task, root, config, worker=worker)
        wall = time.perf_counter() - t0
        report(f"{task.id} {'cold' if i == 0 else 'warm'} round trip {describe(result, wall)}")
        if i == 0:
            first = result
            continue
        trips.append(wall)
        warm.append(result)
    return first, trips, warm, result


def spread(values: list[float]) -> tuple[float, float]:
    """(mean, coefficient of variation); NaN where there are too few values."""
    mean = statistics.fmean(values) if values else math.nan
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else math.nan
    return mean, cv


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
        first, trips, warm, result = round_trips(relu.load_task(), materialise(relu, tmp_path / "roundtrip"),
                                                 config, worker, ROUND_TRIPS)
        details["roundtrip_last"] = result.to_dict()
        timed = [r for r in warm if r.speedup_eager is not None]
        mean, cv = spread([r.speedup_eager for r in timed])
        _, cv_raw = spread([r.eager.median_ms / r.candidate.median_ms for r in timed])
        details["speedups"] = [r.speedup_eager for r in timed]
        details["baseline_drifts"] = [r.baseline_drift for r in timed]
        # The ReLU kernel's output is bitwise the reference's, which the comparison settles in one read; a softmax
        # kernel's is not, so its round trips time the full comparison.
        softmax = solution_case("L1/23_Softmax")
        _, softmax_trips, _, softmax_result = round_trips(softmax.load_task(), materialise(softmax, tmp_path / "sm"),
                                                          config, worker, SOFTMAX_TRIPS)
        details["roundtrip_softmax_last"] = softmax_result.to_dict()

        counts = {"honest": 0, "accepted": 0}
        outcomes: dict[str, str] = {}

        def record(label: str, case: object, res: object, honest_stage: str) -> None:
            ok = res.stage == honest_stage
            outcomes[label] = f"{res.stage} {','.join(res.rule_names)}"
            counts["honest"] += 1
            counts["accepted"] += ok
            log.info("%-28s %-4s %s %s%s", case.name, "ok" if ok else "MISS", res.stage, res.rule_names,
                     "" if ok else f": {res.reason[:300]} {res.log[-1500:]}")

        for case in gpu_cases():
            if case.expect != "correct":
                continue
            ws = materialise(case, tmp_path / "cases")
            res = evaluate(case.load_task(), ws, EvalConfig(mode=case.mode, profile=case.profiled, reps=20,
                                                            warmup=3, timeout_s=300), worker=worker)
            record(f"gpu/{case.name}", case, res, "timed")
        for case in cpu_cases():
            if case.expect != "correct":
                continue
            res = evaluate(case.load_task(), case.solution, EvalConfig(mode=case.mode, profile=False, device="cpu",
                                                                       timeout_s=120), worker=worker)
            record(f"cpu/{case.name}", case, res, "correct")
        adversarial = run_corpus(adversarial_cases())
        outcomes.update({f"{o.case.device}/{o.case.name}": o.describe() for o in adversarial})
        corpus = tally(adversarial)
        details["adversarial_not_blocked"] = corpus.pop("holes")
        details["cases"] = outcomes
    metrics = {
        "roundtrip_s": statistics.median(trips),
        "roundtrip_cold_s": first.total_seconds or 0.0,
        "roundtrip_softmax_s": statistics.median(softmax_trips),
        "speedup_eager_mean": mean if math.isfinite(mean) else 0.0,
        "speedup_cv": cv if math.isfinite(cv) else -1.0,
        "speedup_cv_uncorrected": cv_raw if math.isfinite(cv_raw) else -1.0,
        **corpus,
        "honest_accepted": counts["accepted"],
        "honest_total": counts["honest"],
        "benchmark_seconds": time.perf_counter() - started,
    }
    path = write_result("evaluator", metrics, command="PYTHONPATH=src python3 benchmarks/evaluator.py", extra=details)
    log.info("wrote %s: %s", path, metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
