"""Why a judge-clock request costs about 0.25 ms more than its kernels (GPU host, torch only, about a minute).

The judge times a candidate's request as a wall-clock span in its own process: it flushes the L2, synchronises,
waits out its cadence, sends the request, the candidate's process (woken from SIGSTOP) replays a CUDA graph and
synchronises, and the judge copies the outputs; the null model's span (a graph of output copies only) is
subtracted. On the H200 (2026-12-03) every case came out 0.22-0.31 ms per request above Nsight Compute's kernel
time, at K = 1 to 64, in strict and relaxed mode alike. The candidates this probe tells apart:

  idle     the device idles between the flush and the request (the cadence's pad) and runs the next kernels slower
           (clocks falling when idle): the kernel's own event time after 0 to 50 ms of idle, in one process;
  process  the kernels of a second process run slower right after the first process used the device (a context
           switch): the kernel's event time, and the wall span less the null's, across two processes as the judge
           and the runner do it (SIGSTOP between requests, a pipe for the request);
  warm     the same two-process request with the device kept busy until the request is sent (a warm-up kernel of
           about 1 ms right before), which removes the idle part if that is the cause; and with the warm-up in the
           runner's process instead, at the start of the request (inside the span, null and work alike), which
           removes a cost of the first kernels after the other process used the device.

Writes benchmarks/results/idle_probe.json (machine, date, command) and prints a table.

    PYTHONPATH=src python3 benchmarks/idle_probe.py [--mib 256] [--requests 30]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

IDLE_MS = (0.0, 0.5, 2.0, 10.0, 50.0)


def _graphs(torch: Any, mib: int) -> tuple[Any, Any, Any]:
    """A memory-bound work graph (read x, write y: 2 x ``mib`` MiB) and a null graph (copy of ready-made output)."""
    n = mib * (1 << 20) // 4
    x = torch.rand(n, device="cuda")
    y = torch.empty_like(x)
    out = torch.empty_like(x)
    ready = torch.rand_like(x)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.mul(x, 1.0001, out=y)
        out.copy_(y)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    work, null = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(work, stream=stream):
        torch.mul(x, 1.0001, out=y)
        out.copy_(y)
    with torch.cuda.graph(null, stream=stream):
        out.copy_(ready)
    return work, null, (x, y, out, ready)


def _events(torch: Any, graph: Any) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def in_process(mib: int, requests: int) -> dict[str, Any]:
    """The kernels' event time after each idle gap, and the host span of replay + synchronise, in one process."""
    import torch

    work, null, keep = _graphs(torch, mib)
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    out: dict[str, Any] = {}
    for idle in IDLE_MS:
        events, spans, null_spans = [], [], []
        for _ in range(requests):
            for graph, sink in ((null, null_spans), (work, spans)):
                flush.zero_()
                torch.cuda.synchronize()
                if idle:
                    time.sleep(idle / 1e3)
                t0 = time.perf_counter()
                if graph is work:
                    events.append(_events(torch, graph))
                else:
                    graph.replay()
                    torch.cuda.synchronize()
                sink.append((time.perf_counter() - t0) * 1e3)
        out[f"idle_{idle:g}ms"] = {"event_ms": statistics.median(events),
                                   "span_less_null_ms": statistics.median(spans) - statistics.median(null_spans)}
        print(f"in_process idle {idle:g} ms: {out[f'idle_{idle:g}ms']}", flush=True)
    del keep
    return out


def _runner(conn: Any, mib: int, warm_ms: float) -> None:
    """The candidate's side: replays the graph it is told to (0 null, 1 work), synchronises, answers its event
    time; stopped by the judge between requests. ``warm_ms``: first keep the device busy this long in this process
    (inside the request's span, for the null and the work alike)."""
    import torch

    work, null, keep = _graphs(torch, mib)
    scratch = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    repeats = max(1, int(warm_ms / 0.05))
    conn.send("ready")
    while True:
        which = conn.recv()
        if which is None:
            return
        if warm_ms:
            for _ in range(repeats):
                scratch.zero_()
            torch.cuda.synchronize()
        conn.send(_events(torch, work if which else null))


def two_processes(mib: int, requests: int, warm_ms: float, runner_warm_ms: float = 0.0) -> dict[str, Any]:
    """The judge's way: flush and synchronise here, SIGCONT the runner, send, wait, SIGSTOP; the wall span less the
    null's, and the runner's own event time of the work. ``warm_ms``: keep this process's device busy for about that
    long right before sending (0: the flush only)."""
    import torch

    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_runner, args=(there, mib, runner_warm_ms), daemon=True)
    proc.start()
    assert here.recv() == "ready"
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    spans: dict[int, list[float]] = {0: [], 1: []}
    events: list[float] = []
    repeats = max(1, int(warm_ms / 0.05))  # a flush of 256 MiB takes about 0.05-0.1 ms on an H200
    try:
        for _ in range(requests):
            for which in (0, 1):
                flush.zero_()
                torch.cuda.synchronize()
                time.sleep(0.002)  # the cadence's pad: a short idle, as between the judge's requests
                if warm_ms:
                    for _ in range(repeats):
                        flush.zero_()
                    torch.cuda.synchronize()
                os.kill(proc.pid, signal.SIGCONT)
                t0 = time.perf_counter()
                here.send(which)
                event = here.recv()
                spans[which].append((time.perf_counter() - t0) * 1e3)
                os.kill(proc.pid, signal.SIGSTOP)
                if which:
                    events.append(event)
        os.kill(proc.pid, signal.SIGCONT)
        here.send(None)
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    row = {"span_less_null_ms": statistics.median(spans[1]) - statistics.median(spans[0]),
           "runner_event_ms": statistics.median(events), "null_span_ms": statistics.median(spans[0])}
    print(f"two processes, warm {warm_ms:g} ms here, {runner_warm_ms:g} ms in the runner: {row}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the work's input (and output) in MiB")
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args(argv)
    from benchmarks_io import write_result

    rows = {"in_process": in_process(args.mib, args.requests),
            "two_processes": two_processes(args.mib, args.requests, 0.0),
            "two_processes_warm_1ms": two_processes(args.mib, args.requests, 1.0),
            "two_processes_runner_warm_1ms": two_processes(args.mib, args.requests, 0.0, 1.0)}
    hot = rows["in_process"]["idle_0ms"]["event_ms"]
    metrics = {"hot_event_ms": hot,
               "idle_50ms_excess_ms": rows["in_process"]["idle_50ms"]["event_ms"] - hot,
               "two_process_excess_ms": rows["two_processes"]["span_less_null_ms"] - hot,
               "two_process_warm_excess_ms": rows["two_processes_warm_1ms"]["span_less_null_ms"] - hot,
               "two_process_runner_warm_excess_ms":
                   rows["two_processes_runner_warm_1ms"]["span_less_null_ms"] - hot}
    command = "PYTHONPATH=src python3 benchmarks/idle_probe.py " + " ".join(argv or sys.argv[1:])
    write_result("idle_probe", metrics, command=command.strip(), extra=rows)
    for name, row in rows.items():
        print(name, row)
    print(metrics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
