"""Run execution filters in worker processes, each candidate with a time cap.

torch.compile spends seconds of CPU per candidate, so candidates are filtered in parallel. A candidate that runs
past its cap (a compile that never ends) has its worker killed and replaced; the candidate is rejected as
``timeout`` with the phase it was in. Workers share one lock around timing, so that runtimes measured on a shared
GPU are not inflated by another worker's kernels. Workers are spawned (not forked): CUDA does not survive a fork.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from cuda_agent.errors import PoolError
from cuda_agent.synth.filters import FilterConfig, FilterResult

log = logging.getLogger(__name__)


def _worker_main(conn: Connection, config: dict[str, Any], lock: Any, env: dict[str, str]) -> None:
    os.environ.update(env)
    from cuda_agent.synth.filters import FilterConfig, run_filters

    import torch  # noqa: F401  (imported before the first job, so its import is not charged to a candidate)

    import cuda_agent.tasks.validate  # noqa: F401

    cfg = FilterConfig(**config)
    if cfg.check_compile:
        warm_up(cfg)
    conn.send(("ready", -1, ""))
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        index, code = job
        conn.send(("phase", index, "start"))
        result = run_filters(code, cfg, phase=lambda p, i=index: conn.send(("phase", i, p)), timing_lock=lock)
        conn.send(("done", index, result.to_dict()))


def warm_up(config: FilterConfig) -> None:
    """Compile a tiny function once, so that importing the compiler stack and its first compile (tens of seconds)
    are not charged to the first candidate's time cap."""
    import torch

    try:
        fn = torch.compile(lambda x: torch.relu(x) * 2.0 + 1.0, backend=config.compile_backend)
        fn(torch.randn(64, device=config.device))
        torch._dynamo.reset()
    except Exception as exc:  # a broken compiler shows up again, per candidate, as compile_failed
        log.warning("torch.compile warm-up failed: %s", exc)


@dataclass
class _Slot:
    process: Any
    conn: Connection
    index: int | None = None
    started: float = 0.0
    phase: str = ""
    ready: bool = False


class WorkerPool:
    """``workers`` processes running `run_filters` with ``config``; submit candidates, poll for verdicts.

    A candidate's cap (``timeout_s``) runs from when its worker starts on it; a worker still starting up (importing
    torch, warming up the compiler) gets ``startup_s`` more.
    """

    def __init__(self, workers: int, config: FilterConfig, timeout_s: float, env: dict[str, str] | None = None,
                 startup_s: float = 600.0) -> None:
        if workers < 1:
            raise PoolError(f"a worker pool needs at least one worker, got {workers}")
        self.config = config
        self.timeout_s = timeout_s
        self.startup_s = startup_s
        self.env = {"TORCHINDUCTOR_COMPILE_THREADS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
        self._ctx = mp.get_context("spawn")
        self._lock = self._ctx.Lock()
        self._slots = [self._spawn() for _ in range(workers)]

    def _spawn(self) -> _Slot:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_worker_main, args=(child, self.config.to_dict(), self._lock, self.env), daemon=True
        )
        process.start()
        child.close()
        return _Slot(process, parent)

    @property
    def idle(self) -> int:
        return sum(1 for s in self._slots if s.index is None)

    @property
    def busy(self) -> int:
        return len(self._slots) - self.idle

    def submit(self, index: int, code: str) -> None:
        """Give a candidate to an idle worker; raises `PoolError` if none is idle."""
        for slot in self._slots:
            if slot.index is None:
                slot.conn.send((index, code))
                slot.index, slot.started, slot.phase = index, time.monotonic(), "queued"
                return
        raise PoolError("no idle worker: poll for results before submitting more")

    def poll(self, timeout: float = 0.5) -> list[tuple[int, FilterResult]]:
        """Verdicts that arrived within ``timeout`` seconds, plus timeouts and crashes turned into rejections."""
        done: list[tuple[int, FilterResult]] = []
        busy = {s.conn: s for s in self._slots if s.index is not None}
        if busy:
            for conn in wait(list(busy), timeout=timeout):
                slot = busy[conn]  # type: ignore[index]
                try:
                    while slot.index is not None and slot.conn.poll():
                        kind, index, payload = slot.conn.recv()
                        if kind == "ready":
                            slot.ready = True
                        elif kind == "phase":
                            if payload == "start":
                                slot.started = time.monotonic()
                            slot.phase = payload
                        elif index == slot.index:
                            done.append((index, FilterResult(**payload)))
                            slot.index = None
                except (EOFError, OSError):
                    done.append((slot.index, FilterResult.reject("worker_crashed", f"worker died in phase {slot.phase}")))  # type: ignore[arg-type]
                    self._replace(slot)
        now = time.monotonic()
        for slot in self._slots:
            cap = self.timeout_s if slot.phase not in {"queued"} else self.timeout_s + self.startup_s
            if slot.index is not None and now - slot.started > cap:
                log.warning("candidate %d passed %.0f s in phase %s: killing its worker", slot.index, self.timeout_s, slot.phase)
                done.append((slot.index, FilterResult.reject("timeout", f"over {self.timeout_s:.0f} s in phase {slot.phase}")))
                self._replace(slot)
        return done

    def _replace(self, slot: _Slot) -> None:
        slot.process.kill()
        slot.process.join(timeout=10)
        slot.conn.close()
        fresh = self._spawn()
        slot.process, slot.conn, slot.index, slot.phase = fresh.process, fresh.conn, None, ""

    def close(self) -> None:
        """Stop every worker (running candidates are abandoned)."""
        for slot in self._slots:
            try:
                if slot.index is None:
                    slot.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        deadline = time.monotonic() + 5
        for slot in self._slots:
            slot.process.join(timeout=max(0.1, deadline - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(timeout=5)
            slot.conn.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
