"""Start-up cost of a cold `cuda-agent eval`: what a fresh process spends outside the evaluation itself.

    PYTHONPATH=src python3 benchmarks/cold_eval.py [--cases 10] [--merge-into benchmarks/results/build_throughput.json]

Each case is one `python3 -m cuda_agent.cli.main eval --task L?/... --solution benchmarks/solutions/... --json F` in a
new process (the user's command). ``overhead_s`` = that process's wall time minus the evaluation's own phases
(``extra.phase_seconds``: reference set-up, build, baselines, candidate process, calls, audits, profile): the
interpreter, the CLI's imports, starting the judge's process and importing torch there, writing the result. One
run per case: whether the baseline and build caches were warm changes only phases, which are subtracted.
``cli_import_s`` is the time to
print `--version` (the CLI's own start), and ``cli_imports_torch`` whether the CLI process itself imported torch
(it should not: the judge and the candidate each need it, nobody else).

Writes benchmarks/results/cold_eval.json and, with --merge-into, adds ``cold_eval_overhead_s`` to that result.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from benchmarks_io import write_result  # noqa: E402

SOLUTIONS = ROOT / "benchmarks" / "solutions"


def task_id(folder: Path) -> str:
    level, rest = folder.name.split("_", 1)
    return f"{level}/{rest}"


def timed_run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    return time.perf_counter() - start, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--merge-into", type=Path, default=None)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cli = [sys.executable, "-m", "cuda_agent.cli.main"]

    probe = ("import sys, runpy; sys.argv=['cuda-agent','--version']\n"
             "try:\n runpy.run_module('cuda_agent.cli.main', run_name='__main__')\n"
             "except SystemExit: pass\nprint('TORCH' if 'torch' in sys.modules else 'NOTORCH')")
    import_s, done = timed_run([sys.executable, "-c", probe], env)
    imports_torch = "TORCH" in done.stdout.split()

    folders = sorted(p for p in SOLUTIONS.iterdir() if p.is_dir())[: args.cases]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            out = Path(tmp) / f"{folder.name}.json"
            workspace = Path(tmp) / folder.name  # the solutions are the agent's files only: made into a workspace
            subprocess.run(cli + ["workspace", "new", task_id(folder), str(workspace)], check=True, env=env,
                           capture_output=True, timeout=300)
            shutil.copyfile(folder / "model_new.py", workspace / "model_new.py")
            if (folder / "kernels").is_dir():
                shutil.rmtree(workspace / "kernels", ignore_errors=True)
                shutil.copytree(folder / "kernels", workspace / "kernels")
            argv = cli + ["eval", "--task", task_id(folder), "--solution", str(workspace), "--json", str(out)]
            wall, done = timed_run(argv, env)
            if not out.is_file():
                rows.append({"case": folder.name, "wall_s": wall, "error": (done.stdout + done.stderr)[-600:]})
                print(f"{folder.name}: no result ({done.returncode})", file=sys.stderr)
                continue
            result = json.loads(out.read_text())
            phases = (result.get("extra") or {}).get("phase_seconds") or {}
            inside = sum(float(v) for v in phases.values())
            rows.append({"case": folder.name, "wall_s": round(wall, 3), "phases_s": round(inside, 3),
                         "overhead_s": round(wall - inside, 3), "stage": result.get("stage"),
                         "reward": result.get("reward"), "phase_seconds": phases,
                         "reason": str(result.get("reason") or "")[:600]})
            print(f"{folder.name}: wall {wall:.2f} s, phases {inside:.2f} s, overhead {wall - inside:.2f} s, "
                  f"{result.get('stage')} {str(result.get('reason') or '')[:300]!r} "
                  f"{str(result.get('log') or '')[-600:]!r}", file=sys.stderr)
    # an evaluation that failed before its phases ran has nothing to subtract: only verdicts count
    overheads = [r["overhead_s"] for r in rows if "overhead_s" in r and r.get("phase_seconds")]
    metrics = {"cases": len(rows), "cases_with_result": len(overheads),
               "cold_eval_overhead_s": statistics.median(overheads) if overheads else -1.0,
               "cold_eval_overhead_max_s": max(overheads) if overheads else -1.0,
               "cli_import_s": round(import_s, 3), "cli_imports_torch": imports_torch}
    command = "PYTHONPATH=src python3 benchmarks/cold_eval.py " + " ".join(sys.argv[1:])
    write_result("cold_eval", metrics, command=command.strip(), extra={"cases": rows})
    if args.merge_into is not None and args.merge_into.is_file():
        record = json.loads(args.merge_into.read_text())
        record["metrics"]["cold_eval_overhead_s"] = metrics["cold_eval_overhead_s"]
        record.setdefault("details", {})["cold_eval"] = {"command": command.strip(), **metrics}
        args.merge_into.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(metrics), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
