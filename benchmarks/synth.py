"""Benchmark: a rule-based synthesis run on a GPU host; at least 200 accepted tasks within 6 minutes.

Runs the full filter chain on CUDA (eager, determinism, degeneracy, 1-100 ms band with size scaling, torch.compile
with inductor in worker processes, KernelBench decontamination, near-duplicates) and writes
benchmarks/results/synth.json with generated, accepted and one count per rejection reason.

    PYTHONPATH=src python3 benchmarks/synth.py --out /tmp/synth/tasks.parquet
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="parquet to write (not committed)")
    parser.add_argument("--n", type=int, default=230, help="accepted tasks wanted")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--task-timeout", type=float, default=60.0, help="cap per candidate (compile included)")
    parser.add_argument("--budget", type=float, default=240.0, help="seconds after which no candidate is submitted")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernelbench", default=None)
    parser.add_argument("--fresh", action="store_true", help="delete an earlier state file first")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile filter (smoke tests only)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from benchmarks_io import write_result
    from cuda_agent.synth import FilterConfig, RuleComposer, SynthConfig, SynthRun, crawl_operators
    from cuda_agent.synth.pipeline import state_path

    start = time.monotonic()
    if args.fresh:
        state_path(args.out).unlink(missing_ok=True)
    catalog = crawl_operators(include_transformers=True)
    crawl_s = time.monotonic() - start
    print(f"[{crawl_s:5.1f}s] catalog: {len(catalog)} operators, {len(catalog.composable())} composable, "
          f"{len(catalog.standalone())} standalone, {len(catalog.dropped)} dropped", flush=True)
    catalog.save(args.out.with_name(args.out.name + ".catalog.json"))
    filters = FilterConfig(device=args.device, min_ms=1.0, max_ms=100.0, max_input_bytes=2 << 30,
                           check_compile=not args.no_compile)
    config = SynthConfig(n=args.n, seed=args.seed, workers=args.workers, task_timeout_s=args.task_timeout,
                         time_budget_s=args.budget, kernelbench=args.kernelbench, filters=filters)
    run = SynthRun(RuleComposer(catalog, seed=args.seed), config, args.out,
                   progress=lambda p: print(
                       f"[{time.monotonic() - start:5.1f}s] {p.generated:4d} candidates, {p.accepted:4d} accepted, "
                       f"{p.in_flight:2d} in flight; #{p.last.index}: "
                       f"{'accepted %.2f ms' % (p.last.runtime_ms or 0) if p.last.accepted else p.last.reason}",
                       flush=True) if p.last else None)
    print(f"KernelBench tasks indexed for decontamination: {len(run.kb)}", flush=True)
    summary = run.run()
    total = time.monotonic() - start
    metrics = summary.metrics()
    metrics.update({"total_s": round(total, 1), "crawl_s": round(crawl_s, 1), "workers": args.workers,
                    "catalog_operators": len(catalog), "kernelbench_indexed": len(run.kb),
                    "accepted_per_minute": round(summary.accepted / max(summary.seconds, 1e-9) * 60, 1)})
    path = write_result("synth", metrics, command=" ".join([Path(sys.executable).name, *sys.argv]))
    print(f"\n{'outcome':<36}{'count':>8}")
    print(f"{'generated':<36}{summary.generated:>8}")
    print(f"{'accepted':<36}{summary.accepted:>8}")
    for reason, count in sorted(summary.rejected.items(), key=lambda kv: -kv[1]):
        print(f"{'rejected: ' + reason:<36}{count:>8}")
    print(f"total {total:.0f} s; wrote {path} and {summary.out}")
    return 0 if summary.accepted >= 200 and total <= 360 else 1


if __name__ == "__main__":
    sys.exit(main())
