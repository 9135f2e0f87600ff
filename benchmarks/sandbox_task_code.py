"""Task code is untrusted: a hostile task through `cuda-agent eval`, a SIGKILL of it mid-call, and the zombies
`cuda-agent serve` leaves after real evaluations.

Adds to benchmarks/results/sandbox.json (the sandbox overhead's metrics are kept):

- ``task_code_host_read_attempts``: reads the hostile task attempts (secret-looking environment variables, host
  files, ``$HOME/.ssh``, the cache, the checkout, a host port), in each of its 5 phases;
- ``task_code_host_reads_blocked``: those whose canary reached no output (stdout, the JSON result) and no port;
- ``task_code_host_writes``: files it managed to write into ``$HOME``, the cache or the checkout;
- ``eval_sigkill_survivors``: processes of `cuda-agent eval` alive 5 s after it was SIGKILLed during a call;
- ``serve_zombies``: zombie (defunct) processes below a real `cuda-agent serve` (real evaluator, one worker, real
  HTTP) once 20 evaluations of an honest task on ``--device`` are done and its reaper's grace has passed;
- ``judge_sandbox_start_ms``: the median cost of starting a Python in the judge's sandbox, beyond a plain one;
- the evaluation's ``phase_seconds`` (the judge's phases) and the caller's staging time, in details;
- with ``--compare TASK SOLUTION``: what the judge's sandbox costs, phase by phase: ``--n-compare`` evaluations with
  the judge sandboxed (`evaluate`, spawned, as `cuda-agent eval` does) and as many with the judge in this process
  (`evaluate_in_process`; the candidate sandboxed in both), medians per phase and of the total
  (``judge_sandbox_total_s`` less ``judge_host_total_s``).

    PYTHONPATH=src python3 benchmarks/sandbox_task_code.py [--device cpu|cuda] [--profile] [--serve-evaluations 20]
        [--compare L1/19_ReLU benchmarks/single_file_solutions/L1_19_relu.py --n-compare 3]
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks_io import results_dir, write_result
from cuda_agent.procs import ORPHAN_GRACE_S, ORPHAN_SWEEP_S, descendants
from cuda_agent.sandbox.task_code import TaskCodeSpec, interpreter, spawn_task_code

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the probes live beside their tests
from fault_probes.cli_probes import GOOD_TASK, run_cli  # noqa: E402
from fault_probes.server import ServeProcess  # noqa: E402
from fault_probes.task_code import PHASES, SOLUTION, HostileSetup, read_outputs  # noqa: E402

# The honest pair served: SOLUTION computes relu(x) * 2.0, GOOD_TASK at this scale is the same reference.
SERVE_TASK_SCALE = 2.0


def _start_ms(n: int) -> tuple[float, float]:
    """Median ms of `python -c pass`: in the judge's sandbox, and plainly."""
    boxed, plain = [], []
    for _ in range(n):
        started = time.perf_counter()
        spawn_task_code(TaskCodeSpec(), [interpreter(), "-c", "pass"]).wait()
        boxed.append((time.perf_counter() - started) * 1e3)
        started = time.perf_counter()
        subprocess.run([interpreter(), "-c", "pass"], check=True)
        plain.append((time.perf_counter() - started) * 1e3)
    return statistics.median(boxed), statistics.median(plain)


def hostile_eval(device: str, profile: bool, work: Path) -> tuple[dict, dict]:
    with HostileSetup() as setup:
        task, solution, out = work / "task.py", work / "sol.py", work / "out.json"
        task.write_text(setup.task_code())
        solution.write_text(SOLUTION)
        args = ["eval", "--task", str(task), "--solution", str(solution), "--device", device, "--mode", "relaxed",
                "--json", str(out)]
        ran = run_cli(args + ([] if profile else ["--no-profile"]), env=setup.env(), timeout_s=900)
        result = json.loads(out.read_text()) if out.is_file() else {}
        report = setup.assess([ran.output, *read_outputs([out])], phases=len(PHASES))
        report["stage"] = result.get("stage")
        report["left"] = ran.left
    return report, result


def sigkill_survivors(device: str, work: Path) -> list[int]:
    with HostileSetup() as setup:
        (work / "task.py").write_text(setup.task_code())
    (work / "hang.py").write_text(SOLUTION.replace("return torch.relu", "import time\n        time.sleep(600)\n"
                                                   "        return torch.relu"))
    ran = run_cli(["eval", "--task", str(work / "task.py"), "--solution", str(work / "hang.py"), "--device", device,
                   "--mode", "relaxed", "--no-profile", "--timeout", "500"], signal_after_s=25, sig=signal.SIGKILL,
                  after_process="ca_runner.boot", timeout_s=300)
    return ran.left


def _zombies(root: int) -> list[int]:
    """Pids below ``root`` in state Z (exited, not yet reaped), read from /proc/<pid>/stat."""
    found = []
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    found.append(pid)
        except (OSError, IndexError):
            continue
    return found


def serve_zombies(device: str, evaluations: int) -> dict:
    """Zombies below a real `cuda-agent serve` after ``evaluations`` real evaluations sent over HTTP.

    Why: each evaluation's sandbox can leave its inner process to the server (its child subreaper) when the
    bubblewrap monitor dies first; unreaped, they pile up one per evaluation for the server's lifetime (issue 25
    saw 13 after 12). The server gets one worker (evaluations in turn, as on one GPU) and no store (each job is
    evaluated, none answered from a cache); each solution differs by a comment. Zombies are counted the moment
    the last result is in, then again once the reaper has had its grace (ORPHAN_GRACE_S) and two sweeps: the
    second count is the metric, since the reaper deliberately leaves a fresh zombie to its own parent that long.
    """
    from cuda_agent.pool import EvalJob
    from cuda_agent.pool.job import SolutionSnapshot
    from cuda_agent.tasks import Task

    task = Task(id="benchmarks/serve_relu", code=GOOD_TASK.format(scale=SERVE_TASK_SCALE), name="serve_relu")
    config = {"device": device, "mode": "relaxed"}
    server = ServeProcess.start(store="none", standin_s=None, gpus=("0",))
    try:
        started = time.monotonic()
        ids = []
        for index in range(evaluations):
            solution = SolutionSnapshot.from_files({"solution.py": f"{SOLUTION}# evaluation {index}\n"}, "file")
            job = EvalJob.create(task, solution, config=config)
            reply = server.request("POST", "/v1/evaluations", job.to_dict())
            if reply.status != 202:
                raise RuntimeError(f"serve refused evaluation {index}: HTTP {reply.status} {reply.body[:300]!r}")
            ids.append(job.job_id)
        finals = [server.wait_for(job_id, timeout_s=900) for job_id in ids]
        seconds = time.monotonic() - started
        at_last_result = _zombies(server.proc.pid)
        time.sleep(ORPHAN_GRACE_S + 2 * ORPHAN_SWEEP_S)
        after_grace = _zombies(server.proc.pid)
        descendants_alive = server.processes()
    finally:
        code, left = server.stop()
    stages = [(status.get("result") or {}).get("stage") or status.get("status") for status in finals]
    return {"evaluations": evaluations, "device": device, "stages": dict(Counter(map(str, stages))),
            "seconds": round(seconds, 1), "zombies_at_last_result": len(at_last_result),
            "zombie_pids": after_grace, "processes_alive_after_grace": len(descendants_alive),
            "exit_status": code, "left_after_stop": left}


def compare(task_spec: str, solution: str, device: str, n: int) -> dict:
    """Median seconds per phase (and of the whole call) with the judge sandboxed and with it in this process."""
    from cuda_agent.evaluator import EvalConfig, evaluate
    from cuda_agent.evaluator.api import evaluate_in_process
    from cuda_agent.tasks import resolve_task

    task = resolve_task(task_spec)
    config = EvalConfig(mode="relaxed", device=device)
    runs: dict[str, list[dict]] = {"sandboxed": [], "host": []}
    evaluate(task, solution, config)  # untimed: the baselines cached, so that neither side measures them
    for _ in range(n):  # interleaved, so that a drift of the machine falls on both
        for name, run in (("sandboxed", evaluate), ("host", evaluate_in_process)):
            started = time.perf_counter()
            result = run(task, solution, config)
            phases = dict((result.extra or {}).get("phase_seconds") or {})
            phases["stage"] = ((result.extra or {}).get("caller_seconds") or {}).get("stage", 0.0)
            phases["total"] = time.perf_counter() - started
            phases["result_stage"] = result.stage
            runs[name].append(phases)
    out: dict = {"task": task.id, "solution": solution, "n": n, "stages": {k: [r["result_stage"] for r in v]
                                                                           for k, v in runs.items()}}
    names = sorted({k for v in runs.values() for r in v for k in r if k != "result_stage"})
    for name in names:
        values = {k: statistics.median([float(r.get(name, 0.0)) for r in v]) for k, v in runs.items()}
        out[name] = {"sandboxed_s": round(values["sandboxed"], 4), "host_s": round(values["host"], 4),
                     "cost_s": round(values["sandboxed"] - values["host"], 4)}
    return out


def write_compare_only(phases: dict, argv: str) -> Path:
    """sandbox.json with only the judge sandbox's cost replaced (its command recorded beside the file's own)."""
    path = results_dir() / "sandbox.json"
    previous = json.loads(path.read_text()) if path.is_file() else {}
    metrics = dict(previous.get("metrics", {}))
    metrics.update({"judge_sandbox_total_s": phases["total"]["sandboxed_s"],
                    "judge_host_total_s": phases["total"]["host_s"]})
    details = dict(previous.get("details", {}))
    task_code = dict(details.get("task_code", {}))
    task_code["judge_sandbox_cost_by_phase"] = phases
    task_code["judge_sandbox_cost_command"] = f"python3 benchmarks/sandbox_task_code.py {argv.split(' ', 1)[-1]}"
    details["task_code"] = task_code
    return write_result("sandbox", metrics, extra=details, command=previous.get("command"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU host")
    parser.add_argument("--profile", action="store_true", help="time the solution too (phase_seconds of a timed run)")
    parser.add_argument("--n", type=int, default=10, help="sandbox start-up runs")
    parser.add_argument("--serve-evaluations", type=int, default=20,
                        help="real evaluations sent to `cuda-agent serve` before its zombies are counted")
    parser.add_argument("--compare", nargs=2, metavar=("TASK", "SOLUTION"),
                        help="also measure the judge sandbox's cost per phase on this task and solution")
    parser.add_argument("--n-compare", type=int, default=3, help="evaluations per side with --compare")
    parser.add_argument("--compare-only", action="store_true",
                        help="with --compare: measure only the judge sandbox's cost, keeping the file's other numbers")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.compare_only:
        if not args.compare:
            parser.error("--compare-only needs --compare TASK SOLUTION")
        print(write_compare_only(compare(*args.compare, args.device, args.n_compare), " ".join(sys.argv)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        report, result = hostile_eval(args.device, args.profile, Path(tmp))
        survivors = sigkill_survivors(args.device, Path(tmp))
    served = serve_zombies(args.device, args.serve_evaluations)
    boxed, plain = _start_ms(args.n)
    phases = compare(*args.compare, args.device, args.n_compare) if args.compare else None
    path = results_dir() / "sandbox.json"
    previous = json.loads(path.read_text()) if path.is_file() else {}
    metrics = {k: v for k, v in previous.get("metrics", {}).items() if not k.startswith(("task_code_", "eval_sig",
                                                                                          "judge_sandbox", "serve_"))}
    metrics.update({"task_code_host_read_attempts": report["read_attempts"],
                    "task_code_host_reads_blocked": report["reads_blocked"],
                    "task_code_host_writes": report["writes_succeeded"],
                    "eval_sigkill_survivors": len(survivors),
                    "serve_zombies": len(served["zombie_pids"]),
                    "judge_sandbox_start_ms": round(boxed - plain, 2)})
    if phases is not None:
        metrics.update({"judge_sandbox_total_s": phases["total"]["sandboxed_s"],
                        "judge_host_total_s": phases["total"]["host_s"]})
    details = dict(previous.get("details", {}))
    if Path(__file__).name not in previous.get("command", ""):  # a rerun of this script keeps the overhead's
        details["overhead_command"] = previous.get("command", "")
    details["task_code"] = {
        "device": args.device, "stage": report["stage"], "leaks": report["leaks"],
        "connections": report["connections"], "written": report["written"], "survivor_pids": survivors,
        "phase_seconds": (result.get("extra") or {}).get("phase_seconds"),
        "caller_seconds": (result.get("extra") or {}).get("caller_seconds"),
        "total_seconds": result.get("total_seconds"), "python_start_ms": {"sandboxed": boxed, "plain": plain},
        "judge_sandbox_cost_by_phase": phases, "serve": served,
        "what": "a hostile task (5 phases: module, get_init_inputs, __init__, forward, get_inputs) through "
                "`cuda-agent eval`; a SIGKILL of `cuda-agent eval` 25 s after its candidate process started; "
                "an honest task evaluated --serve-evaluations times through `cuda-agent serve` (serve)",
    }
    print(write_result("sandbox", metrics, extra=details))


if __name__ == "__main__":
    main()
