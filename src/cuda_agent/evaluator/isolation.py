"""Run an evaluation in its own process so that nothing the candidate does can take the caller down.

Two ways: `run_isolated` spawns a fresh interpreter per evaluation (simple; pays torch's import every time), and
`WarmWorker` keeps a fork server that imported torch once and forks a fresh child per evaluation (what the pool
uses for the 5-second round trip). Both put the evaluation in its own session and, past the time limit, kill the
whole process group. A crash, an illegal memory access, a hang or running out of memory all come back as an
`EvalResult` whose stage and reason say so. The result itself comes back on the sealed report channel
(`cuda_agent.evaluator.report`); a forged or second report ends in rule ``report_tampering``.
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

from cuda_agent.errors import EvalTimeoutError, PoolError
from cuda_agent.evaluator.report import WITHHELD_EXIT, ReportInbox, wait_for_report
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.evaluator.rules import RuleViolation

log = logging.getLogger(__name__)
_SRC = str(Path(__file__).resolve().parents[2])
_TAIL = 3000


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
    """The result for a process that ended without answering."""
    lower = log_text.lower()
    if "out of memory" in lower or "cudaerrormemoryallocation" in lower or code == -signal.SIGKILL:
        why = "the evaluation ran out of memory" if code != -signal.SIGKILL else \
            "the evaluation was killed (SIGKILL; usually the host ran out of memory)"
        return failure(task_id, "out_of_memory", why, log=log_text, total_seconds=seconds)
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        reason = f"the evaluation process crashed with signal {name}"
    else:
        reason = f"the evaluation process exited with code {code} without a result"
    if "illegal memory access" in lower:
        reason += " (an illegal memory access: a kernel read or wrote out of bounds)"
    return failure(task_id, "crashed", reason + "; see log", log=log_text, total_seconds=seconds)


def _tampered(task_id: str, why: str, log_text: str, seconds: float) -> EvalResult:
    return failure(task_id, "rule_violation", f"the result channel was tampered with: {why}",
                   rules_fired=(RuleViolation("report_tampering", why),), log=log_text, total_seconds=seconds)


def _timed_out(task_id: str, timeout_s: float, log_text: str) -> EvalResult:
    return failure(task_id, "timeout", f"the evaluation ran past its {timeout_s:g} s limit (a hang or an endless "
                                       "kernel) and was killed", log=log_text, total_seconds=timeout_s)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_isolated(job: dict[str, Any], timeout_s: float, env: dict[str, str] | None = None) -> EvalResult:
    """Evaluate ``job`` in a freshly spawned interpreter (its own session); never raises for the candidate's sake."""
    task_id = job["task"]["id"]
    with tempfile.TemporaryDirectory(prefix="cuda_agent_eval_") as tmp, ReportInbox() as inbox:
        job_path, log_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "log.txt")
        with open(job_path, "w") as fh:
            json.dump({"job": job, "env": env or {}, "report_to": inbox.address}, fh)
        start = time.perf_counter()
        with open(log_path, "wb") as log_fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "cuda_agent.evaluator.worker", "--job", job_path],
                stdout=log_fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_child_env(env),
                start_new_session=True,
            )
            try:  # + interpreter start-up
                finished, code = wait_for_report(inbox, proc.pid, proc.poll, time.monotonic() + timeout_s + 30)
                if not finished:
                    _kill_group(proc.pid)
                    proc.wait()
                    return _timed_out(task_id, timeout_s, _tail(log_path))
            finally:
                _kill_group(proc.pid)  # nothing the evaluation started outlives it
        payload, why = inbox.verdict(proc.pid)
        seconds = time.perf_counter() - start
        return _from_report(task_id, payload, why, code, _tail(log_path), seconds)


def _from_report(task_id: str, payload: dict[str, Any] | None, why: str, code: int | None, log_text: str,
                 seconds: float) -> EvalResult:
    """The result an evaluation reported, or the failure that explains why there is none."""
    if why or (payload is not None and "tampered" in payload):
        return _tampered(task_id, why or str(payload["tampered"])[:500], log_text, seconds)  # type: ignore[index]
    if payload is not None and "result" in payload:
        return EvalResult.from_dict(payload["result"])
    if payload is None and code == 0:
        # Rationale: the evaluation exits 0 only after its report went out; exiting 0 without one is candidate code
        # ending the process (os._exit) after trying to report for it.
        return _tampered(task_id, "the evaluation process exited with code 0 without reporting (ended by candidate "
                                  "code)", log_text, seconds)
    if payload is None and code == WITHHELD_EXIT:
        why = "Python threads the evaluation did not start were still running at its end; it withheld its result"
        return failure(task_id, "rule_violation", why, rules_fired=(RuleViolation("background_thread", why),),
                       log=log_text, total_seconds=seconds)
    error = str(payload.get("error", ""))[:2000] if payload is not None else ""
    return _died(task_id, code, log_text + (f"\n{error}" if error else ""), seconds)


class WarmWorker:
    """A fork server for evaluations: start once, then `run` many jobs (concurrently from several threads, if the
    caller wants; each job is its own forked process). Use as a context manager or call `close`."""

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

    def start(self) -> None:
        """Start the server and wait until it has imported torch; raise PoolError if it cannot start."""
        if self.alive:
            return
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.evaluator.worker", "--serve", self.socket_path],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self._dir, "server.log"), "wb"),
            stdin=subprocess.DEVNULL, start_new_session=True,
            # torch.cuda.is_available() through NVML, not cuInit: a driver initialised before fork is unusable
            # in the forked children, and the server must stay CUDA-free.
            env=_child_env({"PYTORCH_NVML_BASED_CUDA_CHECK": "1", **(self._env or {})}),
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if line.strip() != b"ready":
            self.close()
            raise PoolError(f"the warm evaluation worker did not start: {_tail(os.path.join(self._dir, 'server.log'))}")

    def close(self) -> None:
        if self._proc is not None:
            _kill_group(self._proc.pid)
            self._proc.wait()
            self._proc = None

    def run(self, job: dict[str, Any], timeout_s: float, env: dict[str, str] | None = None) -> EvalResult:
        """Evaluate ``job`` in a fresh child of the server; never raises for the candidate's sake (PoolError if
        the server itself is gone)."""
        if not self.alive:
            self.start()
        task_id = job["task"]["id"]
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
        deadline = start + timeout_s + 5
        buffer = b""
        pgid: int | None = None
        payload: dict[str, Any] | None = None
        why = ""
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                if pgid is not None:
                    _kill_group(pgid)
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
                elif "report" in message:  # the supervisor's inbox verdict on the evaluation's report
                    payload, why = message["report"], str(message.get("why") or "")
                elif "exit" in message:
                    return _from_report(task_id, payload, why, message["exit"], _tail(log_path),
                                        time.perf_counter() - start)
        return _from_report(task_id, payload, why, None, _tail(log_path), time.perf_counter() - start)


__all__ = ["EvalTimeoutError", "WarmWorker", "run_isolated"]
