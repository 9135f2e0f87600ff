"""Run execution filters in worker processes, each candidate with a time cap.

torch.compile spends seconds of CPU per candidate, so candidates are filtered in parallel. A candidate that runs
past its cap (a compile that never ends) has its worker killed and replaced; the candidate is rejected as
``timeout`` with the phase it was in. Workers share one lock around timing (a file lock, each on a descriptor of
its own), so that runtimes measured on a shared GPU are not inflated by another worker's kernels.

A candidate task is model-written code (`--composer llm`), so each worker is a fresh interpreter in a task-code
sandbox (`cuda_agent.sandbox.task_code`: no host file, secret or network), speaking JSON lines on its stdin and
stdout; whatever it answers is checked before it is believed (`_result`).
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from multiprocessing.connection import wait
from typing import Any

from cuda_agent.errors import PoolError
from cuda_agent.sandbox.task_code import TaskCodeSpec, python_argv, spawn_task_code
from cuda_agent.synth.filters import FilterConfig, FilterResult

log = logging.getLogger(__name__)


class _FileLock:
    """The shared timing lock: ``flock`` on this worker's own descriptor of one file."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


class _Wire:
    """JSON lines over a pipe pair: ``send``, ``recv`` (EOFError at the end), ``poll``, ``fileno`` (for `wait`)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r, self._w = read_fd, write_fd
        self._buffer = b""

    def fileno(self) -> int:
        return self._r

    def send(self, obj: Any) -> None:
        data = (json.dumps(obj) + "\n").encode()
        while data:
            data = data[os.write(self._w, data):]

    def poll(self) -> bool:
        return b"\n" in self._buffer or bool(select.select([self._r], [], [], 0)[0])

    def recv(self) -> Any:
        while b"\n" not in self._buffer:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise EOFError
            self._buffer += chunk
            if len(self._buffer) > 64 << 20:
                raise EOFError
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


def worker_main(lock_fd: int) -> None:
    """In the sandbox: read the config, then candidates, from stdin; answer on a private copy of stdout (the
    candidates' own prints go to stderr)."""
    wire = _Wire(0, os.dup(1))
    os.dup2(2, 1)
    config = wire.recv()
    from cuda_agent.synth.filters import FilterConfig, run_filters

    import torch  # noqa: F401  (imported before the first job, so its import is not charged to a candidate)

    import cuda_agent.tasks.validate  # noqa: F401

    cfg = FilterConfig(**config)
    if cfg.check_compile:
        warm_up(cfg)
    lock = _FileLock(lock_fd)
    wire.send(["ready", -1, ""])
    while True:
        try:
            job = wire.recv()
        except EOFError:
            return
        if job is None:
            return
        index, code = job
        wire.send(["phase", index, "start"])
        result = run_filters(code, cfg, phase=lambda p, i=index: wire.send(["phase", i, p]), timing_lock=lock)
        wire.send(["done", index, result.to_dict()])


def _result(payload: Any, code: str) -> FilterResult:
    """The worker's verdict, checked: known fields of the right types, and the code it hands back is the candidate's
    own with at most its size constant changed (a worker runs the candidate's code, so its word is the candidate's)."""
    from cuda_agent.synth.filters import scaling_constant, set_constant, size_constants

    if not isinstance(payload, dict) or set(payload) - {f.name for f in fields(FilterResult)}:
        return FilterResult.reject("worker_crashed", "the worker's answer is malformed")
    try:
        result = FilterResult(**payload)
    except TypeError:
        return FilterResult.reject("worker_crashed", "the worker's answer is malformed")
    if not isinstance(result.ok, bool) or not isinstance(result.reason, str) or not isinstance(result.code, str):
        return FilterResult.reject("worker_crashed", "the worker's answer is malformed")
    if result.ok and result.code != code:
        name = scaling_constant(code)
        value = size_constants(result.code).get(name or "")
        if name is None or value is None or set_constant(code, name, value) != result.code:
            return FilterResult.reject("worker_crashed", "the worker handed back code that is not the candidate's")
    return result


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
    conn: _Wire
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
        self._codes: dict[int, str] = {}
        self._lock_path = tempfile.mkstemp(prefix="cuda-agent-synth-lock-")[1]
        self._slots = [self._spawn() for _ in range(workers)]

    def _spawn(self) -> _Slot:
        lock_fd = os.open(self._lock_path, os.O_RDWR)
        spec = TaskCodeSpec(gpu=self.config.device != "cpu", env=self.env)
        try:
            process = spawn_task_code(spec, python_argv("cuda_agent.synth.filter_workers", str(lock_fd)),
                                      pass_fds=(lock_fd,), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except Exception as exc:  # SandboxError: candidate tasks are never run outside the sandbox
            raise PoolError(f"cannot start a sandboxed filter worker: {exc}") from exc
        finally:
            os.close(lock_fd)
        assert process.stdin is not None and process.stdout is not None
        wire = _Wire(os.dup(process.stdout.fileno()), os.dup(process.stdin.fileno()))
        process.stdin.close()
        process.stdout.close()
        wire.send(self.config.to_dict())
        return _Slot(_Process(process), wire)

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
                slot.conn.send([index, code])
                self._codes[index] = code
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
                        code = self._codes.get(slot.index, "")
                        if kind == "ready":
                            slot.ready = True
                        elif kind == "phase":
                            if payload == "start":
                                slot.started = time.monotonic()
                            slot.phase = payload
                        elif index == slot.index:
                            done.append((index, _result(payload, code)))
                            self._codes.pop(index, None)
                            slot.index = None
                except (EOFError, OSError, ValueError, TypeError):
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
        try:
            os.unlink(self._lock_path)
        except OSError:
            pass

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Process:
    """A sandboxed worker with the few `multiprocessing.Process` verbs the pool uses."""

    def __init__(self, popen: "subprocess.Popen[bytes]") -> None:
        self.popen = popen

    def kill(self) -> None:
        import signal

        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def join(self, timeout: float | None = None) -> None:
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def is_alive(self) -> bool:
        return self.popen.poll() is None


if __name__ == "__main__":
    worker_main(int(sys.argv[1]))
