"""`WorkerProcess`: the pool's handle on one GPU worker process (start, run one job with a deadline, replace).

Why a process per GPU and not a thread: ``CUDA_VISIBLE_DEVICES`` is per process, a crashed or hung evaluation must
be killable without touching the pool, and a broken CUDA context dies with its process.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cuda_agent import procs
from cuda_agent.errors import PoolError
from cuda_agent.pool.worker_main import EVALUATOR_ENV, HEALTH_ENV
from cuda_agent.pool.job import EvalJob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerReply:
    """What a worker sent back for one job: the result dict or the evaluator's error, and when it ran."""

    job_id: str
    result: dict[str, Any] | None
    error: str | None
    started: float
    finished: float
    broken: bool
    pid: int
    gpu: str


class WorkerFailure(Exception):
    """The worker died or ran past the deadline during a job; ``stage`` is ``crashed`` or ``timeout``."""

    def __init__(self, stage: str, reason: str, started: float | None = None) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.started = started


class WorkerProcess:
    """One worker process pinned to ``gpu`` (None: leave ``CUDA_VISIBLE_DEVICES`` as inherited, as Ray sets it).

    Not thread-safe: one owner thread runs its jobs one after another, which is what makes GPU use exclusive.
    """

    def __init__(self, gpu: str | None, evaluator: Any, *, health_check: bool = False,
                 env: Mapping[str, str] | None = None, log_dir: Path | None = None) -> None:
        self.gpu = gpu
        self._evaluator_blob = base64.b64encode(pickle.dumps(evaluator)).decode()
        self._health_check = health_check
        self._extra_env = dict(env or {})
        self._log_dir = log_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._stderr_path: Path | None = None
        self.pid: int | None = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 300.0) -> None:
        """Start the process and wait for it to say it is ready (after its health check, if asked).

        Raises `PoolError` if it exits, reports an unhealthy GPU, or is not ready within ``timeout_s``.
        """
        if procs.terminating():
            raise PoolError(f"not starting a worker for GPU {self.gpu}: the command is ending")
        env = dict(os.environ)
        env.update(self._extra_env)
        env[EVALUATOR_ENV] = self._evaluator_blob
        env[HEALTH_ENV] = "1" if self._health_check else "0"
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        src = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        fd, name = tempfile.mkstemp(prefix=f"cuda-agent-worker-gpu{self.gpu}-", suffix=".log",
                                    dir=str(self._log_dir) if self._log_dir else None)
        os.close(fd)
        self._stderr_path = Path(name)
        stderr = open(name, "ab")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cuda_agent.pool.worker_main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, env=env, start_new_session=True, bufsize=0,
            )
        finally:
            stderr.close()
        self.pid = self._proc.pid
        procs.register_group(self._proc.pid)
        self._buffer = b""
        try:
            message = self._next_message(timeout_s)
        except TimeoutError:
            message = None
        if message is None or message.get("op") != "ready":
            tail = self.stderr_tail()
            self.kill()
            raise PoolError(f"GPU worker for GPU {self.gpu} did not start (stderr: {tail or 'empty'}); check the "
                            "evaluator and the GPU")
        if not message.get("healthy", True):
            self.kill()
            raise PoolError(f"GPU {self.gpu} failed its health check: {message.get('reason')}")

    def _next_message(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The next protocol line from the worker; None at end of output; raises TimeoutError past the deadline.

        Read here, in the owner's thread, with select: no reader thread, so no extra hand-off per job."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr_path is None:
            return ""
        try:
            with open(self._stderr_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - limit))
                return handle.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def run(self, job: EvalJob, timeout_s: float) -> WorkerReply:
        """Send ``job`` and wait for its result. Raises `WorkerFailure` (after killing the worker) if the worker dies
        (``crashed``) or sends nothing within ``timeout_s`` (``timeout``); the owner then starts a new worker."""
        if not self.alive or self._proc is None or self._proc.stdin is None:
            raise WorkerFailure("crashed", f"the worker for GPU {self.gpu} is not running")
        if self._stderr_path is not None:
            try:
                os.truncate(self._stderr_path, 0)
            except OSError:
                pass
        try:
            self._proc.stdin.write((json.dumps({"op": "eval", "job": job.to_dict()}) + "\n").encode())
        except (BrokenPipeError, OSError) as exc:
            self.kill()
            raise WorkerFailure("crashed", f"the worker for GPU {self.gpu} could not take the job ({exc})") from exc
        try:
            message = self._next_message(timeout_s)
        except TimeoutError:
            self.kill()
            raise WorkerFailure("timeout", f"no result within {timeout_s:.1f} s on GPU {self.gpu}; the worker and "
                                           "its evaluation were killed and a fresh worker replaces it") from None
        if message is None:
            code = self._proc.wait()
            how = f"signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exit code {code}"
            tail = self.stderr_tail()
            self.kill()
            raise WorkerFailure("crashed", f"the worker on GPU {self.gpu} died during the job ({how}); it was "
                                           f"replaced. stderr tail: {tail[-800:] or 'empty'}")
        return WorkerReply(job_id=message["job_id"], result=message.get("result"), error=message.get("error"),
                           started=float(message["started"]), finished=float(message["finished"]),
                           broken=bool(message.get("broken")), pid=int(message["pid"]), gpu=str(message.get("gpu")))

    def interrupt(self) -> None:
        """Kill the worker's processes from another thread; the owner thread, reading from it, sees it die and
        cleans up (its pipes are left open here, so that no descriptor is closed under that read)."""
        if self._proc is not None and self._proc.poll() is None:
            procs.kill_group(self._proc.pid)

    def kill(self) -> None:
        """Kill the worker and everything it started; reap it. Owner thread only (see `interrupt`)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                procs.kill_group(self._proc.pid)
            try:
                self._proc.wait(timeout=30)
                procs.unregister_group(self._proc.pid)
            except subprocess.TimeoutExpired:
                log.error("worker %s for GPU %s did not exit after SIGKILL", self._proc.pid, self.gpu)
            for stream in (self._proc.stdin, self._proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the worker to exit, kill it if it does not, and remove its log."""
        if self.alive and self._proc is not None and self._proc.stdin is not None:
            try:
                self._proc.stdin.write(b'{"op": "stop"}\n')
                self._proc.wait(timeout=timeout_s)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._stderr_path is not None:
            self._stderr_path.unlink(missing_ok=True)
