"""Fault injection against the real commands, on this machine (no GPU needed): every probe of tests/fault_probes
(bad numbers in every numeric field, broken Content-Length, unknown methods, no token, slow and many clients, the
connection cap, a worker SIGKILLed mid-job, the store truncated while serving, SIGTERM/SIGINT/SIGHUP and a drain
that runs out, invalid flags, `cuda-agent tasks` with a hanging task, a row that writes files, a SIGTERM).

Writes benchmarks/results/faults.json: ``probes_total``, ``probes_passed``, ``jobs_submitted`` (jobs the servers
accepted) and ``jobs_lost`` (accepted jobs that never reached a final state, or left no record when the server
stopped); each probe's result is under ``details``. Acceptance: every probe passes and ``jobs_lost`` is 0.

    PYTHONPATH=src python3 benchmarks/faults.py [--only NAME ...]
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from benchmarks_io import write_result

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the probes live beside their tests
from fault_probes import ProbeResult, run_all  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="run only these probes (names as in the result)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    def show(result: ProbeResult) -> None:
        mark = "pass" if result.passed else "FAIL"
        print(f"{mark} {result.name} ({result.seconds:.1f} s): {result.detail}", flush=True)

    results = run_all(on_result=show, only=args.only)
    metrics = {
        "probes_total": len(results),
        "probes_passed": sum(r.passed for r in results),
        "jobs_submitted": sum(r.jobs_submitted for r in results),
        "jobs_lost": sum(r.jobs_lost for r in results),
        "seconds": round(sum(r.seconds for r in results), 1),
    }
    path = write_result("faults", metrics, extra={"probes": [r.to_dict() for r in results],
                                                  "what": "fault probes against cuda-agent serve (stand-in "
                                                          "evaluator, 127.0.0.1) and cuda-agent tasks/eval"})
    print(" ".join(f"{k}={v}" for k, v in metrics.items()), f"-> {path}")
    return 0 if metrics["probes_passed"] == metrics["probes_total"] and metrics["jobs_lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
