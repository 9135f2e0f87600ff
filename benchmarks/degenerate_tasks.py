"""Which KernelBench tasks (levels 1-3) output no signal at their module's initialisation (GPU host, ~2 minutes).

For every task the judge's own classification (`cuda_agent.evaluator.judge.degenerate.classify`) is run on the
task's real sizes: whether a constant would pass the tolerance at initialisation, whether perturbed constant
initialisations restore a signal (the judge then verifies the task with them), and whether the output does not
depend on the inputs at all. Writes benchmarks/results/degenerate_tasks.json (machine, date, command, the lists).

Run: PYTHONPATH=src CUDA_AGENT_KERNELBENCH=/path/to/kernelbench python3 benchmarks/degenerate_tasks.py
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import time
from pathlib import Path

import torch

from benchmarks_io import write_result
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.judge import degenerate, reference

log = logging.getLogger("benchmarks.degenerate")


class _Late(Exception):
    pass


def _alarm(_sig: int, _frame: object) -> None:
    raise _Late()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.environ.get("CUDA_AGENT_KERNELBENCH", ""))
    parser.add_argument("--per-task-s", type=int, default=30)
    parser.add_argument("--budget-s", type=float, default=240.0)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3],
                        help="levels in the order to scan (a short budget reaches the first ones)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = Path(args.root)
    if not (root / "level1").is_dir():
        log.error("no KernelBench folder at %r: set CUDA_AGENT_KERNELBENCH or pass --root", args.root)
        return 2
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    config = EvalConfig()
    rng = random.Random(1234)
    rows: list[dict[str, object]] = []
    started = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    for level in args.levels:
        for path in sorted((root / f"level{level}").glob("*.py"), key=lambda p: int(p.stem.split("_")[0])):
            task_id = f"L{level}/{path.stem}"
            if time.perf_counter() - started > args.budget_s:
                rows.append({"task": task_id, "status": "not run (budget)"})
                continue
            signal.alarm(args.per_task_s)
            try:
                module = reference.load_task_module(path.read_text(), str(path))
                init = reference.init_values(module)
                found = degenerate.classify(module, init, 42, device, config.tolerances,
                                            lambda: rng.getrandbits(48))
                status = "constant" if found.constant else ("perturbed" if found.perturb else "signal")
                rows.append({"task": task_id, "status": status, "rms_init": found.rms_plain,
                             "rms_perturbed": found.rms_perturbed})
            except _Late:
                rows.append({"task": task_id, "status": f"not run (over {args.per_task_s} s)"})
            except Exception as exc:  # noqa: BLE001 - a task that fails here is listed, not fatal
                rows.append({"task": task_id, "status": f"error: {type(exc).__name__}: {exc}"[:200]})
            finally:
                signal.alarm(0)
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            log.info("%-60s %s", task_id, rows[-1]["status"])
    perturbed = [r["task"] for r in rows if r["status"] == "perturbed"]
    constant = [r["task"] for r in rows if r["status"] == "constant"]
    metrics = {"tasks_total": len(rows), "tasks_classified": sum(r["status"] in ("signal", "perturbed", "constant")
                                                                  for r in rows),
               "degenerate_at_init": len(perturbed) + len(constant), "verified_with_perturbed_parameters": len(perturbed),
               "constant_whatever_the_inputs": len(constant), "benchmark_seconds": time.perf_counter() - started}
    path = write_result("degenerate_tasks", metrics,
                        extra={"device": str(device), "perturbed": perturbed, "constant": constant, "rows": rows})
    log.info("wrote %s: %s; perturbed %s; constant %s", path, metrics, perturbed, constant)
    return 0


if __name__ == "__main__":
    sys.exit(main())
