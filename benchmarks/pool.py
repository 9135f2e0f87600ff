"""Pool capacity: CPU scaling with stand-in GPU work, and real throughput and occupancy on one GPU.

CPU mode (default, about 1 minute): 64 stand-in workers (each job sleeps --job-seconds, standing for a GPU
evaluation) against one, in closed loops, giving ``scaling_efficiency_64_workers`` = throughput(64) / (64 x
throughput(1)) (goal >= 0.9), plus the per-job dispatch overhead and worker start-up time.

    PYTHONPATH=src python3 benchmarks/pool.py

GPU mode (--gpu, under 3 minutes on an H200): one real GPU worker evaluating a level-1 KernelBench task with a
real solution: ``evals_per_gpu_minute`` (2 clients keep the queue full) and ``gpu_busy_fraction`` under 32
concurrent HTTP clients (`PoolClient` against `cuda-agent serve`'s server on 127.0.0.1). Busy time is the union
of the GPU worker's evaluation intervals (from the worker's own clock: the time an evaluation owned the GPU,
including its process start, build check and verification, not only kernel time); nvidia-smi utilisation is
sampled too and reported as ``gpu_util_nvidia_smi`` (the fraction of time a kernel was running).

    PYTHONPATH=src python3 benchmarks/pool.py --gpu [--task 19_ReLU] [--solution benchmarks/solutions/L1_19_ReLU]

Both modes merge their metrics into benchmarks/results/pool.json, keeping the other mode's numbers, and copy
``sandbox_overhead_ms`` from benchmarks/results/sandbox.json when it exists.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks_io import machine_description, results_dir, write_result
from cuda_agent.pool import EvalJob, LocalPool, PoolClient, RealEvaluator, StandInEvaluator
from capacity import GpuUtilSampler, busy_fraction, closed_loop, overlapping_jobs, standin_job
from cuda_agent.pool.http import make_server
from cuda_agent.tasks import Task

def _standin_job(client: int, n: int) -> EvalJob:
    return standin_job(f"client {client} job {n}")


def cpu_mode(args: argparse.Namespace) -> tuple[dict[str, float], dict[str, Any]]:
    evaluator = StandInEvaluator(seconds=args.job_seconds)
    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.0)) as pool:
        pool.wait_ready()
        closed_loop(pool, _standin_job, clients=1, seconds=1.0)
        overhead = closed_loop(pool, _standin_job, clients=1, seconds=3.0)
    dispatch_ms = 1000.0 * overhead.seconds / max(1, overhead.completed)
    print(f"dispatch overhead: {dispatch_ms:.2f} ms per job (stand-in of 0 s, one worker)")

    with LocalPool(gpus=["0"], evaluator=evaluator) as pool:
        pool.wait_ready()
        one = closed_loop(pool, _standin_job, clients=2, seconds=args.seconds)
    print(f"1 worker: {one.completed} jobs in {one.seconds:.0f} s = {one.per_minute:.1f}/min")

    started = time.monotonic()
    with LocalPool(gpus=[str(i) for i in range(args.workers)], evaluator=evaluator) as pool:
        pool.wait_ready()
        start_s = time.monotonic() - started
        many = closed_loop(pool, _standin_job, clients=2 * args.workers, seconds=args.seconds)
        overlaps = overlapping_jobs(pool.timeline())
        busy = busy_fraction(pool.timeline(), many.window)
    efficiency = many.per_minute / (args.workers * one.per_minute)
    print(f"{args.workers} workers: {many.completed} jobs = {many.per_minute:.1f}/min; scaling efficiency "
          f"{efficiency:.3f} (goal >= 0.9); workers started in {start_s:.1f} s; overlaps {len(overlaps)}")

    with LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.0)) as pool:
        server = make_server(pool, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        with PoolClient(server.url, poll_wait_s=5) as client:
            client.submit(_standin_job(0, 0)).result()
            http = closed_loop(client, _standin_job, clients=1, seconds=3.0)
        server.shutdown()
        server.server_close()
    http_ms = 1000.0 * http.seconds / max(1, http.completed)
    print(f"HTTP round trip: {http_ms:.2f} ms per job (stand-in of 0 s, one client)")

    metrics = {
        "scaling_efficiency_64_workers" if args.workers == 64 else f"scaling_efficiency_{args.workers}_workers":
            round(efficiency, 4),
        "standin_evals_per_minute_1_worker": round(one.per_minute, 2),
        f"standin_evals_per_minute_{args.workers}_workers": round(many.per_minute, 2),
        "standin_job_seconds": args.job_seconds,
        "dispatch_overhead_ms": round(dispatch_ms, 3),
        "http_overhead_ms": round(http_ms, 3),
        "worker_start_s_all": round(start_s, 3),
        "standin_overlapping_pairs": len(overlaps),
        "standin_min_worker_busy_fraction": round(min(busy.values()), 4) if busy else 0.0,
    }
    details = {"cpu_mode": f"closed loops of {args.seconds:.0f} s; 2 clients per worker keep every queue full; "
                           "dispatch and HTTP overheads are per-job latencies with a 0 s stand-in"}
    return metrics, details


def _level1_task(name: str) -> Task:
    from cuda_agent.tasks import load_kernelbench_dir
    from cuda_agent.locations import kernelbench_root

    root = kernelbench_root()
    if root is None:
        raise SystemExit("KernelBench data not found: set CUDA_AGENT_KERNELBENCH to the folder holding level1/")
    for task in load_kernelbench_dir(root, levels=[1]):
        if task.name == name or task.id == name or task.id == f"L1/{name}":
            return task
    raise SystemExit(f"no level-1 task named {name!r} under {root}")


def gpu_mode(args: argparse.Namespace) -> tuple[dict[str, float], dict[str, Any]]:
    from cuda_agent.evaluator import EvalConfig
    from cuda_agent.pool import detect_gpus
    from cuda_agent.compiler.toolchain import cuda_available

    if not cuda_available():
        raise SystemExit("--gpu needs a CUDA GPU")
    task = _level1_task(args.task)
    solution = Path(args.solution or f"benchmarks/solutions/L1_{task.name}")
    job_template = EvalJob.create(task, solution, EvalConfig(), kind="full")

    def make(client: int, n: int) -> EvalJob:
        return EvalJob(task, job_template.solution, job_template.config, "full")

    gpu = detect_gpus()[0]
    t0 = time.monotonic()
    with LocalPool(gpus=[gpu], evaluator=RealEvaluator()) as pool:
        pool.wait_ready()
        warm = pool.submit(make(0, 0)).result()
        print(f"worker ready and warm-up evaluation done in {time.monotonic() - t0:.1f} s: {warm.stage} ({warm.reason or 'no reason given'})")
        single = closed_loop(pool, make, clients=2, seconds=args.seconds_single)
        durations = [t.finished - t.started for t in pool.timeline()[1:]]
        print(f"one GPU: {single.completed} evaluations in {single.seconds:.0f} s = {single.per_minute:.1f}/min "
              f"({single.stages})")

        server = make_server(pool, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        clients = [PoolClient(server.url, poll_wait_s=10) for _ in range(args.clients)]
        lock = threading.Lock()
        counter = [0]

        class _RoundRobin:
            def submit(self, job: EvalJob) -> Any:
                with lock:
                    counter[0] += 1
                    client = clients[counter[0] % len(clients)]
                return client.submit(job)

        with GpuUtilSampler() as sampler:
            loaded = closed_loop(_RoundRobin(), make, clients=args.clients, seconds=args.seconds_loaded, drain=False)
        # minutes of queued work remain: cancel it, let the running evaluation finish (its interval inside the
        # window counts as busy), then read the timeline
        pool.close(wait=True, cancel_pending=True)
        timeline = pool.timeline()
        for client in clients:
            client.close()
        server.shutdown()
        server.server_close()
    busy = busy_fraction(timeline, loaded.window).get(gpu, 0.0)
    util = sampler.mean(int(gpu) if gpu.isdigit() else 0)
    overlaps = overlapping_jobs(timeline)
    print(f"{args.clients} HTTP clients: {loaded.completed} evaluations = {loaded.per_minute:.1f}/min; GPU busy "
          f"fraction {busy:.3f} (goal >= 0.9); nvidia-smi utilisation {util if util is not None else 'n/a'}; "
          f"overlaps {len(overlaps)}")
    metrics: dict[str, float] = {
        "evals_per_gpu_minute": round(single.per_minute, 2),
        "gpu_busy_fraction": round(busy, 4),
        "evals_per_gpu_minute_32_clients": round(loaded.per_minute, 2),
        "eval_seconds_median": round(statistics.median(durations), 3) if durations else 0.0,
        "gpu_overlapping_pairs": len(overlaps),
    }
    if util is not None:
        metrics["gpu_util_nvidia_smi"] = round(util, 4)
    details = {
        "gpu_task": task.id,
        "gpu_solution": str(solution),
        "gpu_stages_single": single.stages,
        "gpu_stages_loaded": loaded.stages,
        "gpu_busy_fraction_definition": "union of the GPU worker's evaluation intervals (worker clock) inside the "
                                        "loaded window, over the window; gpu_util_nvidia_smi is nvidia-smi's "
                                        "utilization.gpu sampled every 0.5 s",
    }
    return metrics, details


def merge_and_write(metrics: dict[str, float], details: dict[str, Any], command: str) -> Path:
    previous_path = results_dir() / "pool.json"
    merged_metrics: dict[str, float] = {}
    merged_details: dict[str, Any] = {}
    if previous_path.exists():
        previous = json.loads(previous_path.read_text())
        merged_metrics.update(previous.get("metrics", {}))
        merged_details.update(previous.get("details", {}))
        merged_details.setdefault("commands", {})
    sandbox = results_dir() / "sandbox.json"
    if sandbox.exists():
        value = json.loads(sandbox.read_text()).get("metrics", {}).get("sandbox_overhead_ms")
        if value is not None:
            merged_metrics["sandbox_overhead_ms"] = value
            merged_details["sandbox_overhead_ms_source"] = "benchmarks/results/sandbox.json"
    merged_metrics.update(metrics)
    merged_details.update(details)
    commands = dict(merged_details.get("commands", {}))
    mode = "gpu" if "evals_per_gpu_minute" in metrics else "cpu"
    commands[mode] = command
    merged_details["commands"] = commands
    machines = dict(merged_details.get("machines", {}))
    machines[mode] = machine_description()
    merged_details["machines"] = machines
    return write_result("pool", merged_metrics, command=command, extra=merged_details)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="measure a real GPU instead of CPU stand-in scaling")
    parser.add_argument("--workers", type=int, default=64, help="CPU mode: stand-in workers")
    parser.add_argument("--job-seconds", type=float, default=0.5, help="CPU mode: stand-in job length")
    parser.add_argument("--seconds", type=float, default=10.0, help="CPU mode: each closed loop's length")
    parser.add_argument("--task", default="19_ReLU", help="GPU mode: level-1 task name")
    parser.add_argument("--solution", default=None, help="GPU mode: workspace, solution folder or .py")
    parser.add_argument("--clients", type=int, default=32, help="GPU mode: concurrent HTTP clients")
    parser.add_argument("--seconds-single", type=float, default=45.0)
    parser.add_argument("--seconds-loaded", type=float, default=60.0)
    args = parser.parse_args()
    command = " ".join(shlex.quote(a) for a in ["python3", "benchmarks/pool.py", *sys.argv[1:]])
    metrics, details = gpu_mode(args) if args.gpu else cpu_mode(args)
    path = merge_and_write(metrics, details, command)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
