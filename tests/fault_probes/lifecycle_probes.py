"""Probes that each need a `cuda-agent serve` of their own: the store damaged under it, and the signals that end
it (SIGTERM, SIGINT, SIGHUP, a second signal, a drain that runs out of time). After each, no process the server
started may be left, and every job it accepted must be on record."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable

from cuda_agent.store import Store
from fault_probes.base import Ledger, expect, job_body
from fault_probes.server import ServeProcess


def _prefilled_store(path: Path, records: int = 200) -> str:
    """A store with some history, closed (so its file holds every page and no write-ahead log hides damage)."""
    with Store.open(path) as store:
        for i in range(records):
            store.put(f"old-{i}", {"task_id": "old", "stage": "timed", "pad": "x" * 300}, job_id=f"old-{i}")
    return f"sqlite:///{path}"


def store_truncated(workdir: Path, ledger: Ledger) -> str:
    url = _prefilled_store(workdir / "store.db")
    server = ServeProcess.start(store=url)
    try:
        before = ledger.submit(server, job_body(seconds=0.01))
        expect(before.status == 202, f"a job before the damage: {before.status}")
        expect(server.wait_for(before.json["id"], 60).get("status") == "done", "the job before the damage")
        os.truncate(workdir / "store.db", (workdir / "store.db").stat().st_size // 2)
        time.sleep(2.5)  # the service re-checks the store at most every 2 s
        health = server.health()
        expect(health["status"] == "degraded" and not health["ok"], f"health after truncation: {health['status']}")
        expect(health["store"]["ok"] is False and health["store"]["kind"] == "corrupt",
               f"health's store entry: {health['store']}")
        reply = server.request("POST", "/v1/evaluations", job_body())
        expect(reply.status == 503 and "store" in reply.error, f"a submission to a damaged store: {reply.status} "
                                                               f"{reply.body[:200]!r}")
        return f"truncated store: health {health['status']} ({health['problems'][0][:90]}...), submissions 503"
    finally:
        code, left = server.stop()
        expect(not left, f"processes left after the server stopped: {left}")


def signal_drains(sig: int) -> Callable[[Path, Ledger], str]:
    """A probe sending ``sig`` to a server with jobs queued and running: it must stop taking requests, finish
    them, record them, exit 0 and leave no process behind."""

    def probe(workdir: Path, ledger: Ledger) -> str:
        url = f"sqlite:///{workdir / 'store.db'}"
        server = ServeProcess.start(store=url)
        replies = [ledger.submit(server, job_body(seconds=0.5)) for _ in range(6)]
        expect(all(r.status == 202 for r in replies), f"jobs refused: {[r.status for r in replies]}")
        workers = server.workers()
        code, left = server.stop(sig)
        name = signal.Signals(sig).name
        expect(code == 0, f"exit status after {name}: {code}; output: {server.output[-5:]}")
        expect(not left, f"processes left after {name}: {left}")
        missing = ledger.settle_stored(url)
        expect(not missing, f"{len(missing)} accepted jobs were not recorded before the server exited")
        return f"{name}: exit 0, {len(replies)} accepted jobs finished and stored, {len(workers)} workers gone"

    return probe


def drain_runs_out(workdir: Path, ledger: Ledger) -> str:
    """SIGTERM with a job that hangs and ``--drain-timeout 2``: the server waits 2 s, then ends the job with a
    reason (recorded), kills its worker and exits 0."""
    url = f"sqlite:///{workdir / 'store.db'}"
    server = ServeProcess.start(store=url, args=["--drain-timeout", "2"])
    hung = ledger.submit(server, job_body(fault="hang", timeout_s=3600))
    queued = [ledger.submit(server, job_body(seconds=30)) for _ in range(3)]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and server.health()["running"] < 2:
        time.sleep(0.1)
    started = time.monotonic()
    code, left = server.stop(signal.SIGTERM)
    took = time.monotonic() - started
    expect(code == 0 and not left, f"exit {code}, processes left {left}")
    expect(took < 45, f"the server took {took:.1f} s to stop with a 2 s drain (the first result imports torch)")
    with Store.open(url) as store:
        record = store.record_for_job(hung.json["id"])
        queued_records = [store.record_for_job(r.json["id"]) for r in queued]
    expect(record is not None and record.status == "error" and "stopped" in record.result.get("reason", ""),
           f"the hung job's record: {record}")
    expect(all(r is not None and r.status == "error" and "the pool stopped" in r.result["reason"]
               for r in queued_records),
           f"the other jobs' records: {[r.result['reason'] if r else None for r in queued_records]}")
    missing = ledger.settle_stored(url)
    expect(not missing, f"{len(missing)} accepted jobs have no record")
    return f"drain of 2 s: stopped in {took:.1f} s; the hung job recorded as {record.result['stage']}: " \
           f"{record.result['reason'][:70]}..."


def second_signal(workdir: Path, ledger: Ledger) -> str:
    """A second SIGTERM while draining kills everything at once: exit 143, nothing left."""
    server = ServeProcess.start(store="none")
    ledger.submit(server, job_body(fault="hang", timeout_s=3600))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and server.health()["running"] < 1:
        time.sleep(0.1)
    processes = [server.proc.pid, *server.processes()]
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    started = time.monotonic()
    code, left = server.stop(signal.SIGTERM, timeout_s=30)
    took = time.monotonic() - started
    expect(code == 128 + signal.SIGTERM, f"exit status after two SIGTERMs: {code}")
    expect(not left, f"processes left: {left} (of {processes})")
    expect(took < 10, f"the second signal took {took:.1f} s to end the server")
    ledger.accepted.clear()  # the operator chose to end the hung job at once: not a lost job
    return f"second SIGTERM: exit {code} in {took:.1f} s, none of {len(processes)} processes left"


LIFECYCLE_PROBES: dict[str, Callable[[Path, Ledger], str]] = {
    "store_truncated_while_serving": store_truncated,
    "sigterm_drains_and_leaves_no_process": signal_drains(signal.SIGTERM),
    "sigint_drains_and_leaves_no_process": signal_drains(signal.SIGINT),
    "sighup_drains_and_leaves_no_process": signal_drains(signal.SIGHUP),
    "drain_timeout_ends_a_hung_job_with_a_reason": drain_runs_out,
    "second_signal_kills_at_once": second_signal,
}
