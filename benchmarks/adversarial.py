"""Adversarial corpus benchmark: every case of tests/evaluator/cases/adversarial evaluated once, one line each, and the
counts issue 15 asks for.

Counts (from tests/evaluator/adversarial_corpus.py `tally`):
  adversarial_total / adversarial_rejected        cases / cases rejected with nothing leaked or changed
  adversarial_as_expected                         ... and with the rule or stage their header names
  native_adversarial_total / _rejected            the same for cases with C++/CUDA code
  host_read_attempts / host_reads_blocked         cases that go for host files, the judge's environment, the caches,
                                                  another workspace or the project's source / blocked ones

CPU cases run anywhere; GPU cases only where CUDA is (``--device all`` on a GPU host runs both). ``--write`` writes
benchmarks/results/adversarial.json (commit it only from a GPU host run of all cases).

Run: PYTHONPATH=src python3 benchmarks/adversarial.py [--device cpu|gpu|all] [--only NAME,NAME] [--write]
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from benchmarks_io import write_result  # noqa: E402
from cuda_agent.evaluator import WarmWorker, evaluate  # noqa: E402

from adversarial_corpus import (AdversarialCase, Outcome, adversarial_cases, eval_config, judge,  # noqa: E402
                                plant_secrets, remove_secrets, tally)

log = logging.getLogger("benchmarks.adversarial")


def run_corpus(cases: list[AdversarialCase], report: Callable[[str], None] = log.info) -> list[Outcome]:
    """Evaluate ``cases`` with freshly planted secrets through a warm worker that holds them; one line per case."""
    secrets = plant_secrets()
    outcomes: list[Outcome] = []
    try:
        with tempfile.TemporaryDirectory() as tmp, WarmWorker(env=secrets.env_with_cache) as worker:
            for case in cases:
                start = time.perf_counter()
                try:
                    task = case.load_task()
                except BaseException as exc:  # noqa: BLE001 - KernelBench data absent
                    report(f"{case.device}/{case.name:32s} SKIPPED ({exc})")
                    continue
                result = evaluate(task, case.materialise(Path(tmp)), eval_config(case, Path(tmp) / "baselines"),
                                  worker=worker, env=secrets.env_with_cache)
                outcome = judge(case, result, secrets)
                outcomes.append(outcome)
                hole = f"  [known hole: {case.hole[:80]}]" if case.hole else ""
                report(f"{case.device}/{case.name:32s} {'ok  ' if outcome.blocked else 'MISS'} "
                       f"{time.perf_counter() - start:5.1f} s  expect {case.expect:24s} {outcome.describe()}{hole}")
    finally:
        remove_secrets(secrets)
    return outcomes


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "gpu", "all"), default="all")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--write", action="store_true", help="write benchmarks/results/adversarial.json")
    args = parser.parse_args()
    import torch

    devices = ("cpu", "gpu") if args.device == "all" else (args.device,)
    if "gpu" in devices and not torch.cuda.is_available():
        log.warning("no CUDA GPU here: GPU cases skipped")
        devices = tuple(d for d in devices if d != "gpu")
    wanted = {n for n in args.only.split(",") if n}
    cases = [c for d in devices for c in adversarial_cases(d) if not wanted or c.name in wanted]
    started = time.perf_counter()
    outcomes = run_corpus(cases)
    counts = tally(outcomes)
    holes = counts.pop("holes")
    log.info("%s; not blocked: %s", counts, ", ".join(holes) or "none")
    if args.write:
        counts["benchmark_seconds"] = time.perf_counter() - started
        details = {"holes": holes, "cases": {f"{o.case.device}/{o.case.name}": o.describe() for o in outcomes}}
        path = write_result("adversarial", counts, extra=details)
        log.info("wrote %s", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
