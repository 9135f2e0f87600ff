"""Run an evaluation's judge in its own process, so that nothing that happens there takes the caller down.

Two ways: `run_isolated` spawns a fresh interpreter per evaluation (simple; pays torch's import every time), and
`WarmWorker` keeps a fork server that imported torch once and forks a fresh judge per evaluation (what the pools
use). The judge starts the candidate's sandboxed process itself and enforces the evaluation's time limit on every
call; the caller's own limit is the same deadline plus `KILL_GRACE_S` (for the judge to write its "timeout" result),
after which it kills the judge's process group, and with it the candidate's process (bubblewrap ends the sandbox
when its parent dies).
"""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda_agent import procs
from cuda_agent.errors import EvalTimeoutError, PoolError
from cuda_agent.evaluator.result import EvalResult, failure

log = logging.getLogger(__name__)
_SRC = str(Path(__file__).resolve().parents[2])
_TAIL = 3000
KILL_GRACE_S = 3.0


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if extra:
        env.update(extra)
    return env


def _tail(path: str | Path) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ""
    return data[-_TAIL:].decode(errors="replace")


def _died(task_id: str, code: int | None, log_text: str, seconds: float) -> EvalResult:
    """The result for a judge process that ended without answering (not the candidate's doing: its own process
    is apart)."""
    why = f"the judge process ended (code {code}) without a result; see log"
    if code == -signal.SIGKILL:
        why = "the judge process was killed (SIGKILL; usually the host ran out of memory)"
    return failure(task_id, "eval_error", why, log=log_text, total_seconds=seconds)


def _timed_out(task_id: str, timeout_s: float, log_text: str) -> EvalResult:
    return failure(task_id, "timeout", f"the evaluation ran past its {timeout_s:g} s limit (a hang or an endless "
                                       "kernel) and was killed", log=log_text, total_seconds=timeout_s)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stamp(job: dict[str, Any]) -> dict[str, Any]:
    """The job with the moment its time limit started counting (the caller's clock)."""
    return {**job, "started_unix": time.time()}


def run_isolated(job: dict[str, Any], timeout_s: float, env: dict[str, str] | None = None) -> EvalResult:
    """Evaluate ``job`` in a freshly spawned judge process (its own session); never raises for the candidate's
    sake."""
    task_id = job["task"]["id"]
    job = stamp(job)
    with tempfile.TemporaryDirectory(prefix="cuda_agent_eval_") as tmp:
        job_path, log_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "log.txt")
        result_path = os.path.join(tmp, "result.json")
        with open(job_path, "w") as fh:
            json.dump({"job": job, "env": env or {}}, fh)
        start = time.perf_counter()
        with open(log_path, "wb") as log_fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cuda_agent.evaluator.judge_process", "--job", job_path, "--result", result_path],
                stdout=log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_child_env(env),
                start_new_session=True,
            )
            procs.register_group(proc.pid)  # a signal to the caller ends the judge and its candidate too
            try:
                code = proc.wait(timeout=timeout_s + KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
                return _timed_out(task_id, timeout_s, _tail(log_path))
            finally:
                kill_group(proc.pid)  # nothing the judge started outlives it
                procs.unregister_group(proc.pid)
        seconds = time.perf_counter() - start
        try:
            with open(result_path) as fh:
                return EvalResult.from_dict(json.load(fh))
        except (OSError, ValueError):
            return _died(task_id, code, _tail(log_path), seconds)


class WarmWorker:
    """A fork server for evaluations: start once, then `run` many jobs (concurrently from several threads, if the
    caller wants; each job is its own forked judge). Use as a context manager or call `close`."""

    def __init__(self, env: dict[str, str] | None = None, start_timeout_s: float = 120.0) -> None:
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._dir = tempfile.mkdtemp(prefix="cuda_agent_worker_")
        self.socket_path = os.path.join(self._dir, "worker.sock")
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "WarmWorker":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the server and wait until it has imported torch; raise PoolError if it cannot start."""
        if self.alive:
            return
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.evaluator.judge_process", "--serve", self.socket_path,
             "--end-with-parent"],
            # stdin: a pipe this process holds open until it ends (even by SIGKILL), when the server stops too
            stdout=subprocess.PIPE, stderr=open(os.path.join(self._dir, "server.log"), "wb"),
            stdin=subprocess.PIPE, start_new_session=True,
            # torch.cuda.is_available() through NVML, not cuInit: a driver initialised before fork is unusable
            # in the forked children, and the server must stay CUDA-free.
            env=_child_env({"PYTORCH_NVML_BASED_CUDA_CHECK": "1", **(self._env or {})}),
        )
        procs.register_group(self._proc.pid)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if line.strip() != b"ready":
            self.close()
            raise PoolError(f"the warm evaluation worker did not start: {_tail(os.path.join(self._dir, 'server.log'))}")

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            kill_group(self._proc.pid)
            self._proc.wait()
            procs.unregister_group(self._proc.pid)
            self._proc = None

    def run(self, job: dict[str, Any], timeout_s: float, env: dict[str, str] | None = None) -> EvalResult:
        """Evaluate ``job`` in a fresh judge forked from the server; never raises for the candidate's sake
        (PoolError if the server itself is gone)."""
        if not self.alive:
            self.start()
        task_id = job["task"]["id"]
        job = stamp(job)
        log_path = os.path.join(self._dir, f"eval_{os.getpid()}_{time.monotonic_ns()}.log")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        start = time.perf_counter()
        try:
            conn.connect(self.socket_path)
            conn.sendall((json.dumps({"job": job, "env": env or {}, "log_path": log_path}) + "\n").encode())
            return self._await(conn, task_id, timeout_s, log_path, start)
        except OSError as exc:
            raise PoolError(f"lost the warm evaluation worker: {exc}; it is restarted on the next run") from exc
        finally:
            conn.close()
            try:
                os.unlink(log_path)
            except OSError:
                pass

    def _await(self, conn: socket.socket, task_id: str, timeout_s: float, log_path: str, start: float) -> EvalResult:
        deadline = start + timeout_s + KILL_GRACE_S
        buffer = b""
        pgid: int | None = None
        candidate: int | None = None
        try:
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    return _timed_out(task_id, timeout_s, _tail(log_path))
                conn.settimeout(remaining)
                try:
                    chunk = conn.recv(1 << 20)
                except socket.timeout:
                    continue
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line.decode())
                    if "pid" in message:
                        pgid = int(message["pid"])
                        candidate = message.get("candidate_pgid")
                        for group in (pgid, candidate):
                            if group is not None:
                                procs.register_group(int(group))
                    elif "result" in message:
                        return EvalResult.from_dict(message["result"])
                    elif "error" in message:
                        return failure(task_id, "eval_error", f"the judge failed: {message['error']}"[:2000],
                                       log=_tail(log_path), total_seconds=time.perf_counter() - start)
            return _died(task_id, None, _tail(log_path), time.perf_counter() - start)
        finally:
            for group in (pgid, candidate):
                if group is not None:
                    kill_group(int(group))
                    procs.unregister_group(int(group))


__all__ = ["EvalTimeoutError", "KILL_GRACE_S", "WarmWorker", "kill_group", "run_isolated"]
