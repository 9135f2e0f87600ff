"""Fault injection against the real commands: what a careless or hostile client, a dying worker, a damaged store
and a signal do to `cuda-agent serve`, and what untrusted task code does to `cuda-agent tasks`.

Used by tests/faults (each probe is a test) and benchmarks/faults.py (all probes, one JSON record). Everything
runs on 127.0.0.1 with the stand-in evaluator (no GPU), every wait is bounded, and every server is stopped by the
probe that started it, which then checks that none of its processes is left.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Iterable

from fault_probes.base import Ledger, ProbeResult, run_probe
from fault_probes.cli_probes import CLI_PROBES
from fault_probes.http_probes import HTTP_PROBES, SERVER_ARGS
from fault_probes.lifecycle_probes import LIFECYCLE_PROBES
from fault_probes.server import ServeProcess

__all__ = ["CLI_PROBES", "HTTP_PROBES", "LIFECYCLE_PROBES", "SERVER_ARGS", "Ledger", "ProbeResult",
           "ServeProcess", "run_all"]


def run_all(workdir: Path | None = None, *, on_result: Callable[[ProbeResult], None] | None = None,
            only: Iterable[str] | None = None) -> list[ProbeResult]:
    """Run every probe (or those named in ``only``) and return their results, in order."""
    wanted = set(only) if only is not None else None
    results: list[ProbeResult] = []

    def record(result: ProbeResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    with tempfile.TemporaryDirectory(prefix="cuda-agent-faults-") as tmp:
        root = Path(workdir or tmp)
        http = {name: probe for name, probe in HTTP_PROBES.items() if wanted is None or name in wanted}
        if http:
            ledger = Ledger()
            server = ServeProcess.start(store=f"sqlite:///{root / 'shared.db'}", args=SERVER_ARGS)
            try:
                for name, probe in http.items():
                    before = len(ledger.accepted)
                    result = run_probe(name, lambda p=probe: p(server, ledger))
                    result.jobs_submitted = len(ledger.accepted) - before
                    record(result)
                lost = ledger.settle_live(server)
            finally:
                code, left = server.stop()
            record(ProbeResult("shared_server_stops_cleanly", code == 0 and not left and not lost,
                               f"exit {code}; processes left {left}; accepted jobs never finished: {len(lost)}",
                               jobs_lost=len(lost)))
        for name, probe in {**LIFECYCLE_PROBES, **CLI_PROBES}.items():
            if wanted is not None and name not in wanted:
                continue
            folder = root / name
            folder.mkdir(parents=True, exist_ok=True)
            ledger = Ledger()
            result = run_probe(name, lambda p=probe, f=folder, lg=ledger: p(f, lg))
            result.jobs_submitted, result.jobs_lost = len(ledger.accepted), len(ledger.lost)
            record(result)
    return results
