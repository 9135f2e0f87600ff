"""Run the agent's bash commands: in the namespaced sandbox (`cuda_agent.sandbox`) or, where that is not available,
in a plain local subprocess confined only by its working folder and a clean environment.

In both, the commands SKILL.md names (``cuda-agent build|verify|profile|submit``) reach the environment's handler:
the sandbox through its `Broker`, the local runner through `LocalBroker`, a small Unix-socket server whose client
script is the ``cuda-agent`` on the command's PATH.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from cuda_agent import procs
from cuda_agent.errors import SandboxError

log = logging.getLogger(__name__)

CommandHandler = Callable[[str, list[str]], tuple[str, int]]
"""``handler(command, args) -> (text, exit_code)`` for ``cuda-agent <command> <args...>`` typed in bash."""

_KEEP_ENV = ("LANG", "LC_ALL", "TERM", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class CommandOutput:
    """A finished command: stdout and stderr interleaved, its exit code, and whether it was killed on timeout."""

    output: str
    exit_code: int
    timed_out: bool = False
    seconds: float = 0.0
    truncated_bytes: int = 0


class CommandRunner(Protocol):
    def run(self, command: str, timeout_s: float) -> CommandOutput:
        """Run ``command`` with bash in the workspace; raise `SandboxError` only if it could not be started."""
        ...

    def close(self) -> None:
        ...


class LocalBroker:
    """Serve ``cuda-agent <command>`` calls from commands run by `LocalRunner` (one at a time, on a thread)."""

    def __init__(self, handler: CommandHandler) -> None:
        self.handler = handler
        self.dir = Path(tempfile.mkdtemp(prefix="cuda-agent-broker-"))
        self.bin_dir = self.dir / "bin"
        self.bin_dir.mkdir()
        self.socket_path = self.dir / "broker.sock"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.socket_path))
        self._server.listen(4)
        self._closed = False
        self._write_client()
        self._thread = threading.Thread(target=self._serve, name="cuda-agent-broker", daemon=True)
        self._thread.start()

    def _write_client(self) -> None:
        client = self.bin_dir / "cuda-agent"
        client.write_text(
            f"#!{sys.executable} -I\n"
            "import json, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            f"s.connect({str(self.socket_path)!r})\n"
            "s.sendall(json.dumps({'argv': sys.argv[1:]}).encode() + b'\\n')\n"
            "s.shutdown(socket.SHUT_WR)\n"
            "data = b''.join(iter(lambda: s.recv(65536), b''))\n"
            "reply = json.loads(data or b'{\"text\": \"cuda-agent: no reply from the environment\\\\n\", \"exit_code\": 2}')\n"
            "sys.stdout.write(reply['text'])\n"
            "sys.stdout.flush()\n"
            "sys.exit(int(reply['exit_code']))\n"
        )
        client.chmod(client.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                try:
                    data = b"".join(iter(lambda: conn.recv(65536), b""))
                    argv = [str(a) for a in json.loads(data.decode()).get("argv", [])]
                    if not argv:
                        text, code = "usage: cuda-agent build|verify|profile|submit\n", 2
                    else:
                        text, code = self.handler(argv[0], argv[1:])
                except Exception as exc:  # the handler must never take the broker down
                    log.exception("broker handler failed")
                    text, code = f"cuda-agent: internal error: {type(exc).__name__}: {exc}\n", 1
                try:
                    conn.sendall(json.dumps({"text": text if text.endswith("\n") else text + "\n", "exit_code": code}).encode())
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        try:
            self._server.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class LocalRunner:
    """Run bash in ``workspace`` as a local subprocess with a clean environment (no API keys), its own process
    group (killed whole on timeout), and output capped at ``output_limit`` bytes while it runs."""

    def __init__(self, workspace: Path, handler: CommandHandler, *, output_limit: int = 1_000_000) -> None:
        self.workspace = Path(workspace)
        self.output_limit = output_limit
        self.broker = LocalBroker(handler)

    def _env(self) -> dict[str, str]:
        cuda_bin = Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc").parent
        path = os.pathsep.join([str(self.broker.bin_dir), str(Path(sys.executable).parent), str(cuda_bin), "/usr/local/bin", "/usr/bin", "/bin"])
        env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
        env.update(PATH=path, HOME=str(self.workspace), PWD=str(self.workspace), PYTHONDONTWRITEBYTECODE="1")
        return env

    def run(self, command: str, timeout_s: float) -> CommandOutput:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                ["bash", "-c", command], cwd=self.workspace, env=self._env(), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start bash in {self.workspace}: {exc}") from exc
        procs.register_group(proc.pid)
        kept = bytearray()
        dropped = [0]

        def pump() -> None:
            assert proc.stdout is not None
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
                room = self.output_limit - len(kept)
                kept.extend(chunk[: max(room, 0)])
                dropped[0] += max(len(chunk) - max(room, 0), 0)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        procs.kill_group(proc.pid)
        proc.wait()
        procs.unregister_group(proc.pid)
        reader.join(timeout=5)
        code = proc.returncode if not timed_out else 124
        return CommandOutput(kept.decode(errors="replace"), code, timed_out, time.monotonic() - started, dropped[0])

    def close(self) -> None:
        self.broker.close()


class SandboxRunner:
    """Run bash in `cuda_agent.sandbox.Sandbox` (bubblewrap), with the environment's handler behind its broker."""

    def __init__(self, workspace: Path, handler: CommandHandler, *, limits: object | None = None) -> None:
        from cuda_agent.sandbox import Sandbox

        kwargs: dict[str, object] = {"broker": _broker_handler(handler)}
        if limits is not None:
            kwargs["limits"] = limits
        self._sandbox = Sandbox(workspace, **kwargs)  # type: ignore[arg-type]

    def run(self, command: str, timeout_s: float) -> CommandOutput:
        result = self._sandbox.exec(command, timeout=timeout_s)
        output = result.output
        for violation in getattr(result, "violations", ()):
            output += f"\n[sandbox: {getattr(violation, 'kind', 'violation')}: {getattr(violation, 'detail', violation)}]"
        return CommandOutput(
            output=output,
            exit_code=int(result.exit_code),
            timed_out=bool(result.timed_out),
            seconds=float(result.seconds or 0.0),
            truncated_bytes=int(getattr(result, "truncated_bytes", 0) or 0),
        )

    def close(self) -> None:
        self._sandbox.close()


def _broker_handler(handler: CommandHandler) -> Callable[..., object]:
    def handle(command: str, args: list[str], workspace: object = None) -> object:
        from cuda_agent.sandbox import BrokerReply

        text, code = handler(command, list(args))
        return BrokerReply(text=text, exit_code=code)

    return handle


def sandbox_available() -> bool:
    """Whether bubblewrap can run here (`cuda_agent.sandbox.sandbox_available`)."""
    from cuda_agent.sandbox import sandbox_available as probe

    return bool(probe())


def make_runner(mode: str, workspace: Path, handler: CommandHandler) -> CommandRunner:
    """``bwrap``: the sandbox (raise `SandboxError` if it cannot run); ``local``: a subprocess; ``auto``: the
    sandbox where available, else a subprocess (logged)."""
    if mode not in ("auto", "bwrap", "local"):
        raise SandboxError(f"sandbox mode must be auto, bwrap or local, got {mode!r}")
    if mode == "local":
        return LocalRunner(workspace, handler)
    if sandbox_available():
        return SandboxRunner(workspace, handler)
    if mode == "bwrap":
        raise SandboxError(
            "the bubblewrap sandbox is not available here (cuda_agent.sandbox missing or bwrap not installed); "
            "install bubblewrap (apt-get install bubblewrap) or use sandbox='local'"
        )
    log.warning("sandbox not available; running agent commands in a local subprocess confined to %s", workspace)
    return LocalRunner(workspace, handler)
