"""The host side of ``cuda-agent build|verify|profile|submit`` typed inside a sandbox.

Each sandbox gets its own Unix-domain socket (a filesystem socket, so it works with the network unshared), bound
into the sandbox at /run/cuda-agent/broker.sock. The socket a request arrives on says which workspace it is for:
nothing the client sends can name another workspace. The handler, supplied by the agent environment, does the
work (the build pool, the GPU pool); this module knows nothing about pools or the evaluator.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

COMMANDS = ("build", "verify", "profile", "submit")
SOCKET_NAME = "broker.sock"
MAX_REQUEST_BYTES = 1 << 20
REQUEST_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class BrokerReply:
    """What the in-sandbox ``cuda-agent`` prints and its exit status."""

    text: str
    exit_code: int = 0


Handler = Callable[[str, list[str], Path], BrokerReply]
"""``handler(command, args, workspace) -> BrokerReply``; ``workspace`` is the host path of the caller's workspace."""


class Broker:
    """Serves ``cuda-agent`` requests from sandboxes, each connection on its own thread.

    Args:
        handler: does the work; an exception it raises becomes a reply with exit code 70 and the error's text.
        commands: the accepted command names; anything else gets a usage reply with exit code 2.
    """

    def __init__(self, handler: Handler, commands: tuple[str, ...] = COMMANDS) -> None:
        self.handler = handler
        self.commands = commands
        self._root = Path(tempfile.mkdtemp(prefix="cuda-agent-broker-"))
        os.chmod(self._root, 0o700)
        self._listeners: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False

    def endpoint(self, workspace: Path) -> Path:
        """A new folder holding a listening socket for ``workspace``; bind it into that workspace's sandbox."""
        with self._lock:
            if self._closed:
                raise RuntimeError("broker is closed")
            folder = Path(tempfile.mkdtemp(dir=self._root, prefix="ep-"))
            os.chmod(folder, 0o755)
            path = folder / SOCKET_NAME
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            os.chmod(path, 0o666)
            listener.listen(16)
            self._listeners.append(listener)
        thread = threading.Thread(target=self._accept, args=(listener, Path(workspace)), daemon=True,
                                  name=f"broker-{folder.name}")
        thread.start()
        return folder

    def _accept(self, listener: socket.socket, workspace: Path) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, workspace), daemon=True).start()

    def _serve(self, conn: socket.socket, workspace: Path) -> None:
        """Read one request (a client that stalls is dropped after REQUEST_TIMEOUT_S), answer, reply."""
        with conn:
            conn.settimeout(REQUEST_TIMEOUT_S)
            try:
                request = _read_request(conn)
            except OSError as exc:
                log.info("cuda-agent request for %s not received: %s", workspace, exc)
                return
            except ValueError as exc:
                reply = BrokerReply(f"cuda-agent: bad request: {exc}", 2)
            else:
                try:
                    reply = self._answer(request, workspace)
                except ValueError as exc:
                    reply = BrokerReply(f"cuda-agent: bad request: {exc}", 2)
            try:
                conn.sendall(json.dumps({"text": reply.text, "exit_code": reply.exit_code}).encode() + b"\n")
            except OSError as exc:
                log.info("cuda-agent client for %s went away before its reply: %s", workspace, exc)

    def _answer(self, request: dict, workspace: Path) -> BrokerReply:
        command = request.get("command")
        args = request.get("args", [])
        if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError("expected {'command': str, 'args': [str, ...]}")
        if command not in self.commands:
            return BrokerReply(f"cuda-agent: unknown command {command!r}; use one of: {', '.join(self.commands)}", 2)
        try:
            reply = self.handler(command, list(args), workspace)
        except Exception as exc:  # the handler's failure must reach the agent, not kill the broker
            log.exception("cuda-agent %s failed for %s", command, workspace)
            return BrokerReply(f"cuda-agent {command}: internal error: {type(exc).__name__}: {exc}", 70)
        if not isinstance(reply, BrokerReply):
            return BrokerReply(f"cuda-agent {command}: internal error: handler returned {type(reply).__name__}", 70)
        return reply

    def close(self) -> None:
        """Stop listening on every endpoint and remove the sockets."""
        with self._lock:
            self._closed = True
            for listener in self._listeners:
                try:
                    listener.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                listener.close()
            self._listeners.clear()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def install_client(bin_dir: Path, python: str) -> Path:
    """Write the ``cuda-agent`` client script (`cuda_agent.sandbox.client`, standard library only) into ``bin_dir``
    for ``python`` to run without site packages, and return ``bin_dir``: the folder to put first on the commands'
    PATH. The client finds the broker's socket in ``$CUDA_AGENT_BROKER``."""
    from importlib import resources

    bin_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(bin_dir, 0o755)
    body = resources.files("cuda_agent.sandbox").joinpath("client.py").read_text()
    script = bin_dir / "cuda-agent"
    script.write_text(f"#!{python} -S\n{body}")
    os.chmod(script, 0o755)
    return bin_dir


def _read_request(conn: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError(f"request larger than {MAX_REQUEST_BYTES} bytes")
    try:
        request = json.loads(data.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(request, dict):
        raise ValueError("expected a JSON object")
    return request
