"""`ServeProcess`: a real `cuda-agent serve` started as a child process on 127.0.0.1, and the plain HTTP and socket
calls that fault probes make to it (used by tests/faults and benchmarks/faults.py).

Loopback only: the address is fixed to 127.0.0.1, every wait is bounded, and `stop` ends the server and checks
that none of its processes is left.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import cuda_agent
from cuda_agent.errors import PoolError
from cuda_agent.procs import descendants

HOST = "127.0.0.1"
WORKER_MODULE = "cuda_agent.pool.worker_main"


def package_parent() -> str:
    """The folder holding the cuda_agent package these probes import: put first on the commands' PYTHONPATH, so that
    they run this code, not another installed copy."""
    return str(Path(cuda_agent.__file__).resolve().parents[1])


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, the body parsed as JSON (None when it is not JSON), the raw body, headers."""

    status: int
    json: Any
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str:
        return str(self.json.get("error", "")) if isinstance(self.json, dict) else ""


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class ServeProcess:
    """``python -m cuda_agent.cli.main serve`` on 127.0.0.1 with a free port and the stand-in evaluator.

    ``token`` is the one the server generated and printed (None with ``--insecure-no-token`` in ``args``)."""

    def __init__(self, proc: subprocess.Popen[str], url: str, token: str | None, output: list[str]) -> None:
        self.proc = proc
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.token = token
        self.output = output

    @classmethod
    def start(cls, *, store: str, standin_s: float | None = 0.05, gpus: Sequence[str] = ("0", "1"),
              args: Sequence[str] = (), env: Mapping[str, str] | None = None, timeout_s: float = 120.0) -> "ServeProcess":
        """Start the server and wait (at most ``timeout_s``) for its 'listening on' line (no ``gpus``: no
        ``--gpus`` flag, the stand-in's default; ``standin_s=None``: the real evaluator).

        Raises `PoolError` with the server's output if it does not come up."""
        src = package_parent()
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = src + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
        full_env.pop("CUDA_AGENT_SERVE_TOKEN", None)
        argv = [sys.executable, "-m", "cuda_agent.cli.main", "serve", "--host", HOST, "--port", "0",
                *(["--standin", str(standin_s)] if standin_s is not None else []), *(["--gpus", ",".join(gpus)] if gpus else []), "--store", store, *args]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                                bufsize=1)
        output: list[str] = []
        token = None
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            output.append(line.rstrip("\n"))
            if line.startswith("token: "):
                token = line.split()[1]
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
                server = cls(proc, url, token, output)
                server._drain_output()
                return server
        proc.kill()
        proc.wait()
        raise PoolError("cuda-agent serve did not start: " + " | ".join(output[-20:]))

    def _drain_output(self) -> None:
        """Keep reading the server's output in the background so that it never blocks on a full pipe."""
        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip("\n"))

        threading.Thread(target=pump, name="serve-output", daemon=True).start()

    # ---- processes ------------------------------------------------------------------------------------------------

    def processes(self) -> list[int]:
        """The server's live descendants (its GPU workers and anything they started)."""
        return [pid for pid in descendants(self.proc.pid) if alive(pid)]

    def workers(self) -> list[int]:
        """Pids of the pool's worker processes."""
        return [pid for pid in self.processes() if WORKER_MODULE in cmdline(pid)]

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 90.0) -> tuple[int, list[int]]:
        """Send ``sig``, wait for the server to exit (SIGKILL past ``timeout_s``); return its exit status and the
        pids of its processes still alive afterwards (there should be none)."""
        before = [self.proc.pid, *self.processes()]
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        end = time.monotonic() + 5.0
        left = [pid for pid in before if alive(pid)]
        while left and time.monotonic() < end:
            time.sleep(0.05)
            left = [pid for pid in left if alive(pid)]
        return code, left

    # ---- HTTP -----------------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, token: str | None | bool = True,
                headers: Mapping[str, str] | None = None, timeout_s: float = 30.0, raw_body: bytes | None = None) -> Reply:
        """One request on a fresh connection. ``body`` is sent as JSON (NaN and Infinity written as such);
        ``token``: True for the server's, a string for that one, False or None for none."""
        connection = http.client.HTTPConnection(HOST, self.port, timeout=timeout_s)
        try:
            data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
            sent = {"Content-Type": "application/json", **(headers or {})}
            given = self.token if token is True else (token or None)
            if given:
                sent["Authorization"] = f"Bearer {given}"
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
            return Reply(response.status, _json_or_none(payload), payload, dict(response.getheaders()))
        finally:
            connection.close()

    def raw(self, data: bytes, *, wait_s: float = 15.0, close_write: bool = False) -> tuple[bytes, float]:
        """Send ``data`` on a fresh socket and read until the server closes it or ``wait_s`` passes; return what
        came back and how many seconds it took."""
        started = time.monotonic()
        with socket.create_connection((HOST, self.port), timeout=wait_s) as sock:
            sock.sendall(data)
            if close_write:
                sock.shutdown(socket.SHUT_WR)
            chunks = []
            try:
                while time.monotonic() - started < wait_s:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except (TimeoutError, ConnectionResetError):
                pass
        return b"".join(chunks), time.monotonic() - started

    def health(self) -> dict[str, Any]:
        reply = self.request("GET", "/v1/health")
        if reply.status != 200 or not isinstance(reply.json, dict):
            raise PoolError(f"health answered {reply.status}: {reply.body[:300]!r}")
        return reply.json

    def wait_for(self, job_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """The job's status once it is done or failed (long-polling, at most ``timeout_s``); the last status seen
        otherwise."""
        deadline = time.monotonic() + timeout_s
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            wait = max(0.0, min(20.0, deadline - time.monotonic()))
            reply = self.request("GET", f"/v1/evaluations/{job_id}?wait={wait:.1f}", timeout_s=wait + 30)
            if reply.status == 200 and isinstance(reply.json, dict):
                status = reply.json
                if status.get("status") in ("done", "failed"):
                    return status
            else:
                time.sleep(0.2)
        return status


def _json_or_none(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        return None


def response_json(raw: bytes) -> tuple[int, Any]:
    """Status code and JSON body of a raw HTTP/1.x response (0 and None when it is not one)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    first = head.split(b"\r\n", 1)[0].split()
    status = int(first[1]) if len(first) >= 2 and first[0].startswith(b"HTTP/") and first[1].isdigit() else 0
    return status, _json_or_none(body)
