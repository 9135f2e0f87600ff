"""Run an evaluation's judge in its own process, so that nothing that happens there takes the caller down.

Two ways: `run_isolated` spawns a fresh interpreter per evaluation (simple; pays torch's import every time), and
`WarmWorker` keeps a fork server that imported torch once and forks a fresh judge per evaluation (what the pools
use). Either runs in a task-code sandbox (`cuda_agent.sandbox.task_code`): the judge executes the task's code, which
is untrusted too, so it sees no host file, secret, cache it could write, or network. The judge starts the
candidate's sandboxed process itself, from inside its own, and enforces the evaluation's time limit on every call;
the caller's own limit is the same deadline plus `KILL_GRACE_S` (for the judge to write its "timeout" result),
after which it kills the judge's process group. However the caller ends (SIGKILL included), bubblewrap's
``--die-with-parent`` ends the judge's sandbox, and with its PID namespace every process in it, the candidate's
nested sandbox too. Whatever the judge answers is read with content checks (`cuda_agent.evaluator.trusted`).
"""
from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuda_agent import procs
from cuda_agent.errors import EvalTimeoutError, PoolError, SandboxError
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.evaluator.trusted import MAX_REPLY_BYTES, accept, read_reply_file
from cuda_agent.sandbox.process import gpu_device_nodes
from cuda_agent.sandbox.task_code import TaskCodeSpec, python_argv, spawn_task_code

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
    """The job with the moment its time limit started counting (the caller's clock; kept if already stamped, so
    that the trusted caller's staging counts too)."""
    return job if "started_unix" in job else {**job, "started_unix": time.time()}


def _left(job: dict[str, Any], timeout_s: float) -> float:
    return max(0.0, timeout_s - max(0.0, time.time() - float(job["started_unix"])))


def judge_spec(job: dict[str, Any], rw: list[str], env: dict[str, str] | None = None) -> TaskCodeSpec:
    """The judge's sandbox for ``job``: ``rw`` (its job folder), the staged solution and the baseline cache
    read-only, the GPU when the job may use one."""
    config = job["config"]
    ro = [p for p in ((job.get("prepared") or {}).get("stage"), config.get("baseline_cache_dir")) if p]
    gpu = config.get("device") != "cpu" and bool(gpu_device_nodes())
    return TaskCodeSpec(rw=rw, ro=ro, gpu=gpu, env=dict(env or {}))


def _start_judge(job: dict[str, Any], argv: list[str], rw: list[str], env: dict[str, str] | None,
                 **popen: Any) -> "subprocess.Popen[bytes]":
    """The judge's process: in its task-code sandbox, or (``unsandboxed_trusted_code``, for code you wrote) plain.
    Raises SandboxError when no sandbox can be made."""
    if job["config"].get("unsandboxed_trusted_code"):
        return subprocess.Popen([sys.executable, *argv[1:]], stdin=subprocess.DEVNULL, env=_child_env(env),
                                start_new_session=True, **popen)
    return spawn_task_code(judge_spec(job, rw, env), argv, **popen)


def run_isolated(job: dict[str, Any], timeout_s: float, env: dict[str, str] | None = None) -> EvalResult:
    """Evaluate ``job`` in a freshly spawned judge process (its own sandbox and session); never raises for the
    candidate's or the task's sake."""
    task_id = job["task"]["id"]
    job = stamp(job)
    with tempfile.TemporaryDirectory(prefix="cuda_agent_eval_") as tmp:
        job_path, log_path = os.path.join(tmp, "job.json"), os.path.join(tmp, "log.txt")
        result_path = os.path.join(tmp, "result.json")
        with open(job_path, "w") as fh:
            json.dump({"job": job, "env": env or {}}, fh)
        start = time.perf_counter()
        argv = python_argv("cuda_agent.evaluator.judge_process", "--job", job_path, "--result", result_path)
        with open(log_path, "wb") as log_fh:
            try:
                proc = _start_judge(job, argv, [tmp], env, stdout=log_fh, stderr=subprocess.STDOUT)
            except SandboxError as exc:
                return failure(task_id, "eval_error", f"no sandbox for the task's code (the judge runs it): {exc}")
            procs.register_group(proc.pid)  # a signal to the caller ends the judge and its candidate too
            try:
                code = proc.wait(timeout=_left(job, timeout_s) + KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
                return _timed_out(task_id, timeout_s, _tail(log_path))
            finally:
                kill_group(proc.pid)  # nothing the judge started outlives it
                procs.unregister_group(proc.pid)
        seconds = time.perf_counter() - start
        reply = read_reply_file(result_path)
        if reply is None:
            return _died(task_id, code, _tail(log_path), seconds)
        return _accepted(reply, job, log_path, seconds)


def with_caller_seconds(result: EvalResult, **seconds: float) -> EvalResult:
    """``result`` with the caller's view of its round trip in ``extra["caller_seconds"]`` (diagnostics: where an
    evaluation's wall time goes outside the judge's own phases): ``forked``, the server's judge answering its
    connection; ``answered``, the judge's result read; ``wall`` (`api.evaluate`), all of it."""
    extra = dict(result.extra or {})
    times = dict(extra.get("caller_seconds") or {})
    times.update({k: round(v, 4) for k, v in seconds.items() if math.isfinite(v)})
    extra["caller_seconds"] = times
    return replace(result, extra=extra)


def _accepted(reply: dict[str, Any], job: dict[str, Any], log_path: str, seconds: float) -> EvalResult:
    try:
        return accept(reply, job)
    except ValueError as exc:
        return failure(job["task"]["id"], "eval_error", f"the judge's answer was refused: {exc}",
                       log=_tail(log_path), total_seconds=seconds)


class WarmWorker:
    """A fork server for evaluations: start once, then `run` many jobs (concurrently from several threads, if the
    caller wants; each job is its own forked judge). Use as a context manager or call `close`."""

    def __init__(self, env: dict[str, str] | None = None, start_timeout_s: float = 120.0, *,
                 gpu: bool | None = None, spares: int = 2) -> None:
        """``spares``: candidate processes kept started ahead of the evaluations (each saves an evaluation the
        seconds of importing torch and initialising the device; 0 starts one per evaluation, nothing in between)."""
        if spares < 0:
            raise ValueError(f"WarmWorker: spares must be 0 or more, got {spares}")
        self._spares = spares
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._gpu = bool(gpu_device_nodes()) if gpu is None else gpu
        self._dir = tempfile.mkdtemp(prefix="cuda_agent_worker_")
        self.staging_root = os.path.join(self._dir, "staging")  # what `evaluate` stages here, the server sees
        os.makedirs(self.staging_root, exist_ok=True)
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
        # Rationale: the server forks the judges, which run task code: it lives in a task-code sandbox that sees its
        # own folder (the socket, the logs, the staged solutions) read-write and the baseline cache read-only.
        from cuda_agent.evaluator.baselines import BaselineCache

        cache = BaselineCache().dir
        cache.mkdir(parents=True, exist_ok=True)
        # torch.cuda.is_available() through NVML, not cuInit: a driver initialised before fork is unusable in the
        # forked children, and the server must stay CUDA-free.
        # Rationale: no parent-death signal (it follows the starting thread, and a pool may start the worker from a
        # thread that ends before the process does); the server stops when its stdin's other end closes, which
        # happens when this process ends however it ends, and its sandbox's PID namespace takes every judge along.
        spec = TaskCodeSpec(rw=[self._dir], ro=[str(cache)], gpu=self._gpu, die_with_parent=False,
                            env={"PYTORCH_NVML_BASED_CUDA_CHECK": "1", **(self._env or {})})
        argv = python_argv("cuda_agent.evaluator.judge_process", "--serve", self.socket_path, "--end-with-parent",
                           "--spares", str(self._spares))
        try:
            # stdin: a pipe this process holds open until it ends (even by SIGKILL), when the server stops too
            with open(os.path.join(self._dir, "server.log"), "wb") as log_fh:
                self._proc = spawn_task_code(spec, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=log_fh.fileno())
        except SandboxError as exc:
            raise PoolError(f"the warm evaluation worker cannot start: {exc}") from exc
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
        job = stamp(job)
        log_path = os.path.join(self._dir, f"eval_{os.getpid()}_{time.monotonic_ns()}.log")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        start = time.perf_counter()
        try:
            conn.connect(self.socket_path)
            conn.sendall((json.dumps({"job": job, "env": env or {}, "log_path": log_path}) + "\n").encode())
            return self._await(conn, job, _left(job, timeout_s), log_path, start)
        except OSError as exc:
            raise PoolError(f"lost the warm evaluation worker: {exc}; it is restarted on the next run") from exc
        finally:
            conn.close()
            try:
                os.unlink(log_path)
            except OSError:
                pass

    def _await(self, conn: socket.socket, job: dict[str, Any], timeout_s: float, log_path: str,
               start: float) -> EvalResult:
        task_id = job["task"]["id"]
        deadline = start + timeout_s + KILL_GRACE_S
        buffer = b""
        pgid: int | None = None
        candidate: int | None = None
        forked = math.nan
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
                if len(buffer) > MAX_REPLY_BYTES:  # the judge runs task code: its answer is bounded like any input
                    return _died(task_id, None, _tail(log_path), time.perf_counter() - start)
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        message = json.loads(line.decode())
                    except ValueError:
                        message = None
                    if not isinstance(message, dict):
                        return _died(task_id, None, _tail(log_path), time.perf_counter() - start)
                    if "pid" in message:
                        if pgid is not None or candidate is not None:
                            continue  # Rationale: the first is the server's fork, before task code ran; not later ones
                        forked = time.perf_counter() - start
                        # pids inside the server's sandbox: the host's processes of that number are others'
                        pgid = self._host_pid(message.get("pid"))
                        candidate = self._host_pid(message.get("candidate_pgid"))
                        for group in (pgid, candidate):
                            if group is not None:
                                procs.register_group(group)
                    elif "result" in message:
                        return with_caller_seconds(_accepted(message, job, log_path, time.perf_counter() - start),
                                                   forked=forked, answered=time.perf_counter() - start)
                    elif "error" in message:
                        return failure(task_id, "eval_error", f"the judge failed: {message['error']}"[:2000],
                                       log=_tail(log_path), total_seconds=time.perf_counter() - start)
            return _died(task_id, None, _tail(log_path), time.perf_counter() - start)
        finally:
            for group in (pgid, candidate):
                if group is not None:
                    kill_group(group)
                    procs.unregister_group(group)

    def _host_pid(self, inside: Any) -> int | None:
        """The host pid of the server's descendant whose pid in its own namespace is ``inside`` (None when there is
        none: a number the sandbox names is never signalled as a host pid)."""
        if self._proc is None or not isinstance(inside, int) or isinstance(inside, bool) or inside <= 0:
            return None
        depth = len(_nspids(self._proc.pid)) + 1  # the server's namespace, one below bubblewrap's
        for pid in procs.descendants(self._proc.pid):
            numbers = _nspids(pid)
            if len(numbers) == depth and numbers[-1] == inside:
                return pid
        return None


def _nspids(pid: int) -> list[int]:
    """A process's pids from this process's namespace down to its own (/proc/PID/status ``NSpid``)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            line = next((x for x in fh if x.startswith("NSpid:")), "")
        return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        return []


__all__ = ["EvalTimeoutError", "KILL_GRACE_S", "WarmWorker", "kill_group", "run_isolated", "with_caller_seconds"]
