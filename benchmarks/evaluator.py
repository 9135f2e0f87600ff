"""Evaluator benchmark (GPU host, one call): round trip and speedup stability, the honest corpus, the adversarial
corpus, and the isolation facts of the run.

Writes benchmarks/results/evaluator.json (metrics of issue 15) and benchmarks/results/honest.json (issue 16):
  roundtrip_s            median seconds of 10 warm round trips (L1/19_ReLU workspace, build cached)
  roundtrip_phase_*      the median seconds of each phase of those round trips
  speedup_cv             coefficient of variation of the speedup vs eager over those 10 evaluations of one kernel
  adversarial_total / adversarial_rejected / native_adversarial_total / native_adversarial_rejected
  honest_total / honest_accepted (every honest case: the corpus and the older honest cases)
  candidate_sandboxed    1 when every evaluation of the run ran its candidate in the sandbox
  judge_separate_process 1 when every evaluation reported a candidate process apart from the judge's
  host_reads_blocked / host_read_attempts   the adversarial cases whose route reads host data (host files, the
                         judge's environment, the caches, another workspace, the project's source), and how many of
                         them were rejected with none of the secrets planted for them (adversarial_corpus.plant_secrets,
                         also in the worker's environment) in the result and none changed
  honest_fast_total / honest_fast_accepted   the honest cases the judge timed between 10 us and 1 ms per call
  verdict_flips          cases whose verdict (accepted or not, and the reward) differed between repeats (--repeats)
  stage_changes          cases rejected with the same reward in every repeat but at another stage (a cheat's first
                         wrong call is an ordinary call in one run, a variant's in the next: the variants' places are
                         drawn afresh for every run, so that a candidate cannot predict them)
  reported_time_used     1 when any evaluation used a time the candidate's process reported (the judge's clock only)
  precision_cases_total / precision_cases_rejected   the adversarial cases of the precision route
  reference_as_solution_speedup_min / _max   speedup over eager of the reference's own code submitted as the solution
                         (adversarial `reference_as_solution_*`): 1.0 where the candidate and the baselines are timed
                         alike; above 1.05 the identity earns reward 2
  clock_factor_min / _max   how much slower the reference ran on the judge's clock than in the judge's process
                         (`EvalConfig.reference_on_judge_clock`: both baselines are scaled by it), over the rows
  gpus                   the GPUs the cases were spread over (`--gpus`; one evaluation at a time on each)
  honest_precision_headroom_max   the largest share of its precision bound an honest case's error took (1.0 would
                         be refused; `extra["precision"]` of a result), and that case

Run: PYTHONPATH=src python3 benchmarks/evaluator.py [--budget-s 420] [--skip PHASE ...]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from benchmarks_io import write_result  # noqa: E402
from gpu_clocks import ClockSampler  # noqa: E402
from cuda_agent.evaluator import EvalConfig, EvalResult, WarmWorker, evaluate  # noqa: E402

from adversarial_corpus import (HOST_READ_ROUTES, Secrets, plant_secrets, rejected,  # noqa: E402
                               remove_secrets)
from corpus import Entry, adversarial_entries, honest_entries  # noqa: E402

log = logging.getLogger("benchmarks.evaluator")
ROUND_TRIPS = 10


def device_memory() -> dict[str, Any] | None:
    """The GPUs' memory in use after an evaluation, and by which processes (nvidia-smi; this process never
    initialises CUDA): what an evaluation left held shows here."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        gpus = subprocess.run([smi, "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20).stdout.split("\n")
        apps = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return None
    used = total = 0.0
    for line in gpus:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and all(p.replace(".", "").isdigit() for p in parts):
            used, total = used + float(parts[0]), total + float(parts[1])
    holders = []
    for line in apps:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                command = Path(f"/proc/{parts[0]}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
            except OSError:
                command = "?"
            holders.append({"pid": int(parts[0]), "mib": parts[1], "command": command})
    return {"used_mib": used, "total_mib": total, "used_fraction": round(used / total, 4) if total else 0.0,
            "processes": holders[:12]}


def describe(result: EvalResult, wall_s: float) -> str:
    phases = {k: round(v, 3) for k, v in (result.extra.get("phase_seconds") or {}).items()}
    clock = result.extra.get("judge_clock") or {}
    return (f"{wall_s:.2f} s {result.stage} {','.join(result.rule_names)} {result.reason[:160]!r} "
            f"{json.dumps(where_time_went(result))} "
            f"cand {result.candidate.median_ms if result.candidate else None} eager "
            f"{result.eager.median_ms if result.eager else None} s_e {result.speedup_eager} "
            f"K {clock.get('batch')} {clock.get('clock')} clock factor {clock.get('clock_factor')} "
            f"reported {clock.get('reported_per_call_ms')} phases {json.dumps(phases)}"
            f" judge work {json.dumps(result.extra.get('judge_work_seconds') or {})}"
            f" calibration {json.dumps(result.extra.get('calibration_seconds') or {})}"
            f" stash {json.dumps(result.extra.get('probe_stash') or {})}")


def where_time_went(result: EvalResult) -> dict[str, float | None]:
    """An evaluation's wall seconds in parts: ``stage`` (the caller's check and build); from the job's hand-over
    to the warm worker, ``forked`` (the forked judge's first word) and ``answered`` (its result read); ``judge``
    (the judge's own run) and ``phases`` (the sum of its named phases: ``judge`` less ``phases`` is its start and
    end); ``wall`` (all of it)."""
    caller = result.extra.get("caller_seconds") or {}
    phases = result.extra.get("phase_seconds") or {}
    rounded = lambda v: round(v, 3) if isinstance(v, (int, float)) else None  # noqa: E731
    return {"stage": rounded(caller.get("stage")), "forked": rounded(caller.get("forked")),
            "judge": rounded(result.total_seconds), "phases": rounded(sum(phases.values())) if phases else None,
            "answered": rounded(caller.get("answered")), "wall": rounded(caller.get("wall"))}


def gpu_ids(wanted: int) -> list[dict[str, str]]:
    """The environment that pins each warm worker to its GPU: ``[{}]`` for one (the inherited devices), else one
    ``CUDA_VISIBLE_DEVICES`` per GPU, the first ``wanted`` of those visible (0: all of them)."""
    if wanted == 1:
        return [{}]
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if not visible:
        from cuda_agent.pool.evaluators import query_gpu_names

        visible = [str(i) for i in range(len(query_gpu_names()))]
    if wanted < 0 or not visible or wanted > len(visible):
        raise SystemExit(f"--gpus {wanted}: {len(visible)} GPU(s) visible")
    return [{"CUDA_VISIBLE_DEVICES": v} for v in visible[:wanted or len(visible)]]


def spread(values: list[float]) -> tuple[float, float]:
    mean = statistics.fmean(values) if values else math.nan
    cv = statistics.stdev(values) / mean if len(values) > 1 and mean > 0 else math.nan
    return mean, cv


DEFAULT_CASE_LIMIT_S = 300.0  # one evaluation's limit where the run's budget leaves more


def ran_out_of_time(result: EvalResult) -> bool:
    """The evaluation ended at its time limit: a timeout, or the judge's eval_error for a timeout after its own first
    measurements of the task took more than its allowance (``extra["evaluate_again"]``)."""
    return result.stage == "timeout" or bool(result.extra.get("evaluate_again"))


class Run:
    """Evaluates entries and keeps the run's facts."""

    def __init__(self, workers: list[WarmWorker], tmp: Path, deadline: float, secrets: Secrets) -> None:
        self.workers = workers          # one per GPU (`--gpus`), each pinned to its GPU
        self.worker = workers[0]
        self.secrets = secrets
        self.tmp = tmp
        self.deadline = deadline
        self.rows: list[dict[str, Any]] = []
        self.sandboxed = True
        self.separate = True
        self.reported_used = 0
        self.repeat = 0
        self.clocks = ClockSampler()  # started by main on a GPU host: each row's clocks (`gpu_clocks`)

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def evaluate(self, entry: Entry, worker: WarmWorker | None = None, **overrides: Any) -> EvalResult:
        timeout = min(DEFAULT_CASE_LIMIT_S, max(20.0, self.left() - 15))  # a hang ends before the budget does
        # the judge's own first measurements of a task may add to the case's limit what the budget has besides
        allowance = min(EvalConfig.judge_allowance_s, max(0.0, self.left() - 15 - timeout))
        config = EvalConfig(**{"mode": entry.mode, "timeout_s": timeout, "judge_allowance_s": allowance,
                               "profile": entry.honest or entry.needs_timing,
                               **({} if entry.gpu else {"device": "cpu"}), **overrides})
        start, started_unix = time.perf_counter(), time.time()
        worker = worker or self.worker
        result = evaluate(entry.load_task(), entry.materialise(self.tmp), config, worker=worker,
                          env=self.secrets.env)
        wall = time.perf_counter() - start
        clocks = self.clocks.window(started_unix, time.time()) if entry.gpu else {}
        self._facts(result)
        if ran_out_of_time(result) and timeout < DEFAULT_CASE_LIMIT_S:
            # the run's budget set this limit, not the case: a verdict of the benchmark's clock, not the judge's
            # (L1/19's third repeat got 20 s of the 40 s left and was counted a flip, 2026-12-04)
            self.rows.append({"case": entry.label, "honest": entry.honest, "native": entry.native, "ok": None,
                              "stage": "not run (budget)", "reason": f"cut at {timeout:.0f} s by the run's budget",
                              "repeat": self.repeat, "wall_s": wall})
            log.info("%-5s %-48s cut by the run's budget after %.1f s (not a verdict)", "cut", entry.label, wall)
            return result
        leaked = self.secrets.leaked(result) or bool(self.secrets.tampered())
        ok = (result.reward >= 1) if entry.honest else (rejected(entry.expect, result) and not leaked)
        self.rows.append({"case": entry.label, "honest": entry.honest, "native": entry.native, "style":
                          entry.styles, "expect": entry.expect, "stage": result.stage, "rules": list(result.rule_names),
                          "reward": result.reward, "ok": ok, "speedup_eager": result.speedup_eager,
                          "speedup_compile": result.speedup_compile, "wall_s": wall, "repeat": self.repeat,
                          "judge_ms": result.candidate.median_ms if result.candidate else None,
                          "clock": (result.extra.get("judge_clock") or {}).get("clock"),
                          "clock_factor": (result.extra.get("judge_clock") or {}).get("clock_factor"),
                          "clock_factor_point": (result.extra.get("judge_clock") or {}).get("clock_factor_point"),
                          "precision_headroom": result.precision_share,
                          "gpu": self.workers.index(worker) if len(self.workers) > 1 else None,
                          "leaked": leaked, "reason": result.reason[:400], "notes": list(result.notes)[:6],
                          "batch": (result.extra.get("run") or {}).get("batch"),
                          "seconds": where_time_went(result),
                          "judge_work_seconds": result.extra.get("judge_work_seconds"),
                          "calibration_seconds": result.extra.get("calibration_seconds"),
                          "probe_stash": result.extra.get("probe_stash"),
                          "gpu_clocks": clocks or None,
                          "device_memory_after": device_memory() if entry.gpu else None})
        log.info("%-5s %-48s %s", "ok" if ok else "MISS", entry.label, describe(result, wall))
        memory = self.rows[-1]["device_memory_after"]
        if memory and memory.get("used_fraction", 0) > 0.2:
            log.info("      device memory after it: %s", json.dumps(memory))
        if not ok:
            log.info("      log: %s", result.log[-1200:].replace("\n", " | "))
        return result

    def _facts(self, result: EvalResult) -> None:
        if any(note.startswith("UNSANDBOXED") for note in result.notes):
            self.sandboxed = False
        pids = result.extra.get("processes") or {}
        # only where a candidate process answered (a judge that failed before it started has none to compare)
        if pids.get("candidate") and pids.get("candidate") == pids.get("judge"):
            self.separate = False
        clock = result.extra.get("judge_clock") or {}
        self.reported_used = max(self.reported_used, int(clock.get("reported_time_used") or 0))

    def many(self, entries: list[Entry], parallel: int, timed: bool = False, **overrides: Any) -> None:
        """Evaluate ``entries``, ``parallel`` at once on each GPU (their builds overlap; untimed when parallel
        unless ``timed``: verdicts no longer depend on times, so parallel timed runs only blur the speedups). With
        several GPUs (`--gpus`) each takes the next entry when its evaluations end: one at a time each with
        ``parallel`` 1, as the pools do (one timed job per GPU)."""
        per_gpu = max(1, parallel)
        free: queue.Queue[WarmWorker] = queue.Queue()
        for worker in self.workers:
            for _ in range(per_gpu):
                free.put(worker)
        more = {} if timed or per_gpu == 1 else {"profile": False}

        def one(entry: Entry) -> None:
            if self.left() < 20:  # the result file is written only if the run ends within its budget
                self.rows.append({"case": entry.label, "honest": entry.honest, "native": entry.native,
                                  "ok": None, "stage": "not run (budget)"})
                return
            worker = free.get()
            try:
                self.evaluate(entry, worker, **more, **overrides)
            finally:
                free.put(worker)

        slots = per_gpu * len(self.workers)
        if slots == 1:
            for entry in entries:
                one(entry)
            return
        with ThreadPoolExecutor(slots) as pool:
            list(pool.map(one, entries))


def prebuild(entries: list[Entry], tmp: Path, jobs: int, budget_s: float) -> dict[str, Any]:
    """Check and build every entry's solution, ``jobs`` at once, into the trusted build cache (`trusted.stage`,
    the compilers sandboxed as in every evaluation) before any case is timed: an evaluation then finds its build
    there, and the compilers (a single-file solution's build took 8-54 s on the H200) no longer run between timed
    cases on one GPU. Builds that fail are judged in their evaluation as usual. Returns the count and seconds."""
    from cuda_agent.evaluator import prebuild as build_one

    start = time.perf_counter()
    unique = list({e.label: e for e in entries}.values())

    def one(item: tuple[int, Entry]) -> bool:
        n, entry = item
        if time.perf_counter() - start > budget_s:
            return False
        config = EvalConfig(mode=entry.mode, **({} if entry.gpu else {"device": "cpu"}))
        try:
            return build_one(entry.load_task(), entry.materialise(tmp / "prebuild" / str(n)), config)
        except BaseException as exc:  # noqa: BLE001 - the evaluation meets the same failure (a skip: no data)
            if isinstance(exc, KeyboardInterrupt):
                raise
            log.info("prebuild %s: %s", entry.label, str(exc)[:300])
            return False

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        built = sum(pool.map(one, enumerate(unique)))
    seconds = time.perf_counter() - start
    log.info("prebuilt %d of %d solutions in %.0f s (%d at once)", built, len(unique), seconds, jobs)
    return {"prebuilt": built, "prebuild_seconds": seconds}


def round_trips(run: Run, n: int) -> dict[str, Any]:
    entry = next(e for e in honest_entries() if e.label == "honest/l1_relu_float4")
    root = entry.materialise(run.tmp / "roundtrip")
    config = EvalConfig(mode="strict", timeout_s=300)
    walls, results = [], []
    for i in range(n + 1):
        start = time.perf_counter()
        result = evaluate(entry.load_task(), root, config, worker=run.worker)
        wall = time.perf_counter() - start
        run._facts(result)
        log.info("%s round trip %s", "cold" if i == 0 else "warm", describe(result, wall))
        if i:
            walls.append(wall)
            results.append(result)
    timed = [r for r in results if r.speedup_eager is not None]
    _, cv = spread([r.speedup_eager for r in timed])
    phases: dict[str, list[float]] = {}
    for r in results:
        for name, seconds in (r.extra.get("phase_seconds") or {}).items():
            phases.setdefault(name, []).append(seconds)
    out = {"roundtrip_s": statistics.median(walls), "speedup_cv": cv if math.isfinite(cv) else -1.0,
           "roundtrip_timed": len(timed)}
    out.update({f"roundtrip_phase_{k}_s": statistics.median(v) for k, v in phases.items()})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--skip", nargs="*", default=[])
    parser.add_argument("--parallel", type=int, default=4, help="evaluations at once in the untimed phases")
    parser.add_argument("--untimed-honest", action="store_true",
                        help="evaluate the honest workspaces untimed and in parallel (faster; no timing rules)")
    parser.add_argument("--previous", type=Path, default=None,
                        help="an earlier evaluator.json of this corpus: its cases that passed are kept, the rest run")
    parser.add_argument("--add-to", type=Path, default=None,
                        help="an earlier evaluator.json: every row of its cases (all repeats) is kept and those cases "
                             "are not run again; the rest run, and the metrics cover both (a corpus run in parts, "
                             "across leases; each part's command and date stay in details.parts)")
    parser.add_argument("--rerun", nargs="*", default=[],
                        help="with --add-to: the earlier part's cases whose label contains one of these run again "
                             "(their earlier rows dropped), e.g. after a fix")
    parser.add_argument("--timed-parallel", type=int, default=1,
                        help="evaluate the honest and GPU adversarial cases this many at once, timed (times blurred)")
    parser.add_argument("--repeats", type=int, default=1, help="evaluate every case this many times (verdict flips)")
    parser.add_argument("--only", nargs="*", default=[], help="run only the cases whose label contains one of these")
    parser.add_argument("--gpus", type=int, default=1,
                        help="GPUs to spread the cases over, one warm worker pinned to each (0: every GPU visible); "
                             "a case's repeats may land on different GPUs of the same model")
    parser.add_argument("--prebuild", type=int, default=0, metavar="JOBS",
                        help="build every case's solution first, JOBS at once (no compiler runs between timed cases)")
    parser.add_argument("--background", action="store_true",
                        help="run the CPU-bound phases (single-file builds, CPU cases) beside the GPU phases")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = time.perf_counter()
    metrics: dict[str, Any] = {}
    secrets = plant_secrets()
    gpus = gpu_ids(args.gpus)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        workers = [stack.enter_context(WarmWorker(env={**secrets.env, **pin})) for pin in gpus]
        log.info("%d warm worker(s)%s", len(workers), "".join(f", {p}" for p in gpus if p))
        run = Run(workers, Path(tmp), started + args.budget_s, secrets)
        stack.callback(run.clocks.stop)
        if run.clocks.start().error:
            log.info("GPU clocks not sampled: %s", run.clocks.error)
        if "roundtrip" not in args.skip:
            metrics.update(round_trips(run, ROUND_TRIPS))
        elif args.previous is not None:  # the earlier run's round trips stand (same commit's judge, see the command)
            earlier = json.loads(args.previous.read_text()).get("metrics", {})
            metrics.update({k: v for k, v in earlier.items() if k.startswith("roundtrip") or k == "speedup_cv"})
        honest = honest_entries()
        adversarial = adversarial_entries()
        if args.only:
            honest = [e for e in honest if any(o in e.label for o in args.only)]
            adversarial = [e for e in adversarial if any(o in e.label for o in args.only)]
        parts: list[dict[str, Any]] = []
        if args.add_to is not None:
            earlier_run = json.loads(args.add_to.read_text())
            earlier_rows = [r for r in earlier_run.get("details", {}).get("cases", []) if r.get("ok") is not None
                            and not any(again in r["case"] for again in args.rerun)]
            runs: dict[str, int] = {}
            for r in earlier_rows:
                runs[r["case"]] = runs.get(r["case"], 0) + 1
            # a case the earlier part's budget cut short of --repeats runs is run again, whole
            done_cases = {case for case, n in runs.items() if n >= max(1, args.repeats)}
            earlier_rows = [r for r in earlier_rows if r["case"] in done_cases]
            run.rows.extend(earlier_rows)
            parts = list(earlier_run.get("details", {}).get("parts") or
                         [{"command": earlier_run.get("command"), "date": earlier_run.get("date"),
                           "cases": len(done_cases)}])
            honest = [e for e in honest if e.label not in done_cases]
            adversarial = [e for e in adversarial if e.label not in done_cases]
            log.info("kept %d cases (%d rows) from %s; running %d honest and %d adversarial", len(done_cases),
                     len(earlier_rows), args.add_to, len(honest), len(adversarial))
        if args.previous is not None:
            kept = {r["case"]: r for r in json.loads(args.previous.read_text()).get("details", {}).get("cases", [])
                    if r.get("ok")}
            run.rows.extend(kept.values())
            honest = [e for e in honest if e.label not in kept]
            adversarial = [e for e in adversarial if e.label not in kept]
            log.info("kept %d passing cases from %s; running %d honest and %d adversarial", len(kept), args.previous,
                     len(honest), len(adversarial))
        if args.prebuild:
            phase_of = lambda e: ("honest_single_files" if e.single_file else "honest_workspaces") if e.honest \
                else ("adversarial_gpu" if e.gpu else "adversarial_cpu")  # noqa: E731
            wanted = [e for e in [*honest, *adversarial] if phase_of(e) not in args.skip]
            metrics.update(prebuild(wanted, Path(tmp), args.prebuild, max(0.0, run.left() * 0.4)))
        timed_parallel = args.parallel if args.untimed_honest else args.timed_parallel
        keep_timing = not args.untimed_honest
        phases: list[tuple[str, Callable[[], None]]] = [
            ("honest_workspaces", lambda: run.many([e for e in honest if not e.single_file], timed_parallel,
                                                   keep_timing)),
            ("adversarial_gpu", lambda: run.many([e for e in adversarial if e.gpu], args.timed_parallel, True)),
            ("honest_single_files", lambda: run.many([e for e in honest if e.single_file], args.parallel)),
            ("adversarial_cpu", lambda: run.many([e for e in adversarial if not e.gpu], args.parallel)),
        ]
        background = {"honest_single_files", "adversarial_cpu"} if args.background else set()
        for repeat in range(max(1, args.repeats)):
            run.repeat = repeat
            with ThreadPoolExecutor(2) as side:
                pending = [side.submit(phase) for name, phase in phases
                           if name in background and name not in args.skip]
                for name, phase in phases:
                    if name in args.skip or name in background:
                        continue
                    log.info("=== %s, repeat %d (%.0f s left)", name, repeat, run.left())
                    phase()
                for future in pending:
                    future.result()
    remove_secrets(secrets)
    rows = run.rows
    done = [r for r in rows if r.get("ok") is not None]
    not_run = len(rows) - len(done)  # evaluations (of every repeat) the budget left out
    verdicts: dict[str, set[tuple[Any, ...]]] = {}
    stages: dict[str, set[str]] = {}
    for r in done:
        verdicts.setdefault(r["case"], set()).add((r["ok"], r.get("reward")))
        stages.setdefault(r["case"], set()).add(r["stage"])
    flips = sorted(case for case, seen in verdicts.items() if len(seen) > 1)
    stage_changes = sorted(case for case, seen in stages.items() if len(seen) > 1 and case not in flips)
    # one row per case (its first run), accepted or rejected only if every repeat was
    first: dict[str, dict[str, Any]] = {}
    for r in done:
        row = first.setdefault(r["case"], dict(r))
        row["ok"] = bool(row["ok"]) and bool(r["ok"])
    done = list(first.values())
    adv = [r for r in done if not r["honest"]]
    hon = [r for r in done if r["honest"]]
    metrics.update({
        "adversarial_total": len(adv), "adversarial_rejected": sum(r["ok"] for r in adv),
        "native_adversarial_total": sum(bool(r["native"]) for r in adv),
        "native_adversarial_rejected": sum(bool(r["native"]) and r["ok"] for r in adv),
        "honest_total": len(hon), "honest_accepted": sum(r["ok"] for r in hon),
        "not_run": not_run,
        "candidate_sandboxed": run.sandboxed, "judge_separate_process": run.separate,
        "verdict_flips": len(flips), "stage_changes": len(stage_changes), "reported_time_used": run.reported_used,
        # the fewest runs any case had (the parts of a run in parts may differ)
        "repeats": min((len([r for r in rows if r["case"] == c and r.get("ok") is not None]) for c in verdicts),
                       default=0),
        "benchmark_seconds": time.perf_counter() - started, "gpus": len(gpus),
    })
    fast = [r for r in hon if r.get("judge_ms") is not None and 0.01 <= r["judge_ms"] <= 1.0]
    # the reference as its own solution: its speedup over eager is the clock's bias (1.0 when both are timed alike)
    itself = [r["speedup_eager"] for r in rows if "reference_as_solution" in r["case"] and r.get("speedup_eager")]
    if itself:
        metrics.update(reference_as_solution_speedup_min=min(itself), reference_as_solution_speedup_max=max(itself))
    # how much slower the reference ran on the judge's clock than in the judge's process (the baselines' scale)
    factors = [r["clock_factor"] for r in rows if isinstance(r.get("clock_factor"), (int, float))]
    if factors:
        metrics.update(clock_factor_min=min(factors), clock_factor_max=max(factors))
    precision = [r for r in adv if "precision" in (r.get("style") or ())]
    metrics.update({"honest_fast_total": len(fast), "honest_fast_accepted": sum(bool(r["ok"]) for r in fast),
                    "graph_clock_cases": sum(r.get("clock") == "graph_replay" for r in rows),
                    "host_launched_cases": sum(r.get("clock") == "host_launched" for r in rows),
                    "precision_cases_total": len(precision),
                    "precision_cases_rejected": sum(bool(r["ok"]) for r in precision)})
    # how near the honest cases came to the precision bounds (1.0 is the bound): the false refusals to come
    headroom = [(r["precision_headroom"], r["case"]) for r in hon if r.get("precision_headroom") is not None]
    if headroom:  # the case itself is in details.precision_headroom_worst
        metrics["honest_precision_headroom_max"] = max(headroom)[0]
    ncu_file = ROOT / "benchmarks" / "results" / "timing_vs_ncu.json"
    if ncu_file.is_file():  # measured by its own script (benchmarks/timing_vs_ncu.py); copied, not measured here
        metrics["timing_vs_ncu_max_err"] = json.loads(ncu_file.read_text())["metrics"]["timing_vs_ncu_max_err"]
    reads = [r for r in adv if set(r.get("style") or ()) & set(HOST_READ_ROUTES)]
    metrics.update({"host_read_attempts": len(reads), "host_reads_blocked": sum(r["ok"] for r in reads)})
    command = "PYTHONPATH=src python3 benchmarks/evaluator.py " + " ".join(argv or sys.argv[1:])
    this_part = {"command": command.strip(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "cases": len({r["case"] for r in rows}) - sum(p.get("cases", 0) for p in parts)}
    path = write_result("evaluator", metrics, command=command.strip(),
                        extra={"cases": rows, "flipped_cases": flips, "stage_changed_cases": stage_changes,
                               "parts": [*parts, this_part],
                               "gpu_clocks_sampled": run.clocks.error or f"NVML every {run.clocks.interval_s} s "
                                                                         "(each row's gpu_clocks)",
                               "precision_headroom_worst": max(headroom)[1] if headroom else None})
    styles: dict[str, list[int]] = {}
    for r in hon:
        for style in r.get("style") or ("unlabelled",):
            entry = styles.setdefault(style, [0, 0])
            entry[0] += 1
            entry[1] += bool(r["ok"])
    honest_metrics = {"honest_total": len(hon), "honest_accepted": sum(r["ok"] for r in hon)}
    parity_file = ROOT / "benchmarks" / "results" / "relaxed_parity.json"
    parity: Any = "not measured (benchmarks/relaxed_parity.py, with KernelBench's evaluator carried)"
    if parity_file.is_file():  # measured by its own script; kept, not overwritten by this one
        measured = json.loads(parity_file.read_text())["metrics"]
        parity = {"parity": measured["parity"], "cases": measured["cases"], "source": "relaxed_parity.json"}
    write_result("honest", honest_metrics, command=command.strip(),
                 extra={"by_style": {k: {"total": v[0], "accepted": v[1]} for k, v in sorted(styles.items())},
                        "cases": hon, "relaxed_parity": parity})
    log.info("wrote %s: %s", path, metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
