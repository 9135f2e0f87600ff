"""`TrustedLocalShell`: the same three verbs as `Sandbox` (``exec``, ``read_file``, ``write_file``) and the same
``cuda-agent`` broker protocol, with NO confinement: for trusted use only.

A command runs as this process's user in the workspace folder, with a clean environment (no API keys, no
credentials), its own process group (killed whole on timeout) and its output capped. Nothing stops it from reading or
writing anything this user can: use it only for commands you wrote or trust (tests, your own kernels, a machine
without bubblewrap that runs nothing else). The file verbs keep their rules (workspace only, protected files
refused, disk quota), since those do not need a namespace.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

from cuda_agent import procs
from cuda_agent.errors import SandboxError
from cuda_agent.sandbox._limits import ExecResult, SandboxLimits, Violation
from cuda_agent.sandbox._monitor import disk_usage
from cuda_agent.sandbox.broker import SOCKET_NAME, Broker, Handler, install_client
from cuda_agent.sandbox.shell_base import WorkspaceShell

# Environment variables a command keeps: locale, terminal, and where the CUDA toolkit and GPUs are.
KEPT_ENV = ("LANG", "LC_ALL", "TERM", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
TIMEOUT_EXIT = 124


class TrustedLocalShell(WorkspaceShell):
    """An unconfined shell over one workspace (see the module's warning).

    Args:
        workspace: the workspace folder; commands start in it and see it at its own path.
        limits: ``timeout_s`` (default wall time of a command), ``max_output_bytes`` (output kept, head and tail,
            stdout and stderr together in the command's own order) and ``disk_quota_bytes`` (for ``write_file``) apply;
            the others need the sandbox.
        broker: a `Broker` (or a bare handler, for which one is made) that serves ``cuda-agent <command>``.
        protected: workspace-relative paths ``write_file`` refuses (an agent's workspace passes
            `cuda_agent.workspace.PROTECTED_ROOTS`).
    """

    def __init__(self, workspace: str | Path, limits: SandboxLimits | None = None, *,
                 protected: Sequence[str], broker: Broker | Handler | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise SandboxError(f"workspace {self.workspace} is not a folder; create the workspace first")
        self.workspace_mount = str(self.workspace)
        self.limits = limits or SandboxLimits()
        self.protected = tuple(protected)
        self._violations: list[Violation] = []
        self._usage = disk_usage(self.workspace)
        self._state = Path(tempfile.mkdtemp(prefix="cuda-agent-local-shell-"))
        self._own_broker: Broker | None = None
        self._closed = False
        env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        bin_dir = install_client(self._state / "bin", sys.executable)
        cuda_bin = Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc").parent
        env.update(PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), str(cuda_bin),
                                         "/usr/local/bin", "/usr/bin", "/bin"]),
                   HOME=str(self.workspace), PYTHONDONTWRITEBYTECODE="1", CUDA_AGENT_WORKSPACE=str(self.workspace))
        if broker is not None:
            if not isinstance(broker, Broker):
                broker = self._own_broker = Broker(broker)
            env["CUDA_AGENT_BROKER"] = str(broker.endpoint(self.workspace) / SOCKET_NAME)
        self._env = env

    def exec(self, command: str | Sequence[str], timeout: float | None = None, *, cwd: str | None = None,
             input: str | bytes | None = None) -> ExecResult:
        """Run ``command`` (a bash command line, or an argv list) in the workspace; as `Sandbox.exec`, a failing
        command is a result (returncode 124 and ``timed_out`` when killed on timeout), and `SandboxError` means it
        could not be started."""
        if self._closed:
            raise SandboxError("this shell is closed; create a new one for the workspace")
        argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
        where = self.workspace / cwd if cwd else self.workspace
        limit = float(timeout if timeout is not None else self.limits.timeout_s)
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=where, env={**self._env, "PWD": str(where)},
                                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise SandboxError(f"cannot start {argv[0]} in {where}: {exc}") from exc
        procs.register_group(proc.pid)
        output = _HeadAndTail(self.limits.max_output_bytes)
        reader = threading.Thread(target=_pump, args=(proc, output), daemon=True)
        reader.start()
        if input is not None:
            _feed(proc, input.encode() if isinstance(input, str) else input)
        timed_out = False
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
        _end_group(proc.pid)
        proc.wait()
        procs.unregister_group(proc.pid)
        reader.join(timeout=5)
        stderr = f"\n[killed after the {limit:.1f} s wall-time limit (all its processes)]\n" if timed_out else ""
        self._usage = disk_usage(self.workspace)
        return ExecResult(TIMEOUT_EXIT if timed_out else proc.returncode, output.text(), stderr,
                          timed_out=timed_out, seconds=time.monotonic() - started, truncated_bytes=output.dropped,
                          killed_reason="timeout" if timed_out else "")

    @property
    def violations(self) -> tuple[Violation, ...]:
        """Refusals of the file verbs (commands are not watched: nothing here could see an escape)."""
        return tuple(self._violations)

    def _record(self, violations: list[Violation], command: str) -> None:
        self._violations += violations

    def close(self) -> None:
        """Stop this shell's own broker and remove its client; idempotent; the workspace stays."""
        if self._closed:
            return
        self._closed = True
        if self._own_broker is not None:
            self._own_broker.close()
        shutil.rmtree(self._state, ignore_errors=True)



def _pump(proc: subprocess.Popen, output: "_HeadAndTail") -> None:
    assert proc.stdout is not None
    for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
        output.add(chunk)


class _HeadAndTail:
    """Keeps the first and the last ``limit // 2`` bytes of a stream (an error is usually at the end)."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head, self.tail = bytearray(), bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        self.head.extend(chunk[:room])
        self.tail.extend(chunk[max(room, 0):])
        if len(self.tail) > self.half:
            self.dropped += len(self.tail) - self.half
            del self.tail[:len(self.tail) - self.half]

    def text(self) -> str:
        return bytes(self.head + self.tail).decode(errors="replace")


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _end_group(pgid: int) -> None:
    """Stop the whole group first, so that no member runs on while its children are killed (a shell would go on
    to its next command), then kill the tree and the group."""
    try:
        os.killpg(pgid, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError):
        pass
    procs.kill_group(pgid)
