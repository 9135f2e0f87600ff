"""Sandbox overhead: the median wall time of `true` run through `cuda_agent.sandbox.Sandbox.exec`.

Runs on any Linux machine with bubblewrap (no GPU needed), in well under a minute.
Writes benchmarks/results/sandbox.json with metric ``sandbox_overhead_ms`` (and the bare-bubblewrap and plain
subprocess baselines, to show where the time goes).

    PYTHONPATH=src python3 benchmarks/sandbox_overhead.py [--n 50]
"""
from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import time

from benchmarks_io import write_result
from cuda_agent.sandbox import check_sandbox, measure_overhead_ms


def _median_ms(argv: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        subprocess.run(argv, check=True)
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50, help="runs per measurement")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    identity = check_sandbox()
    overhead = measure_overhead_ms(args.n)
    plain = _median_ms(["true"], args.n)
    bare = _median_ms(["bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib64", "/lib64", "--symlink",
                       "usr/lib", "/lib", "--unshare-all", "--", "/usr/bin/true"], args.n)
    path = write_result("sandbox", {
        "sandbox_overhead_ms": round(overhead, 2),
        "bare_bwrap_ms": round(bare, 2),
        "plain_subprocess_ms": round(plain, 2),
        "runs": args.n,
    }, extra={"identity": identity, "what": "median wall ms of `true`: full Sandbox.exec (mounts, limits, "
                                             "effect checks) vs minimal bwrap vs plain subprocess"})
    logging.getLogger(__name__).warning("wrote %s", path)
    print(f"sandbox_overhead_ms={overhead:.1f} bare_bwrap_ms={bare:.1f} plain_subprocess_ms={plain:.1f} "
          f"(median of {args.n}, identity={identity}) -> {path}")


if __name__ == "__main__":
    main()
