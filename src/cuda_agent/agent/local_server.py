"""A local model server for trying the agent without a hosted endpoint: llama.cpp (through ``llama-cpp-python``'s
OpenAI-compatible server) serving a GGUF file on 127.0.0.1.

`LocalModelServer` starts the server in its own process group, waits until it answers, and stops the whole group on
`stop()` / leaving the ``with`` block (SIGTERM, then SIGKILL). The agent then talks to it as to any endpoint:
``OpenAIConfig(base_url=server.base_url, model=server.model_name)``.

The server uses the chat template stored in the GGUF file (for Qwen2.5 models: ChatML with Hermes tool calls, the
tools rendered into the system message). That server returns the model's tool calls as ``<tool_call>`` text, which
`OpenAIPolicy` parses (`cuda_agent.agent.toolparse`).

``llama-cpp-python`` is not a dependency of cuda-agent (it compiles llama.cpp): install it into any Python
(``pip install 'llama-cpp-python[server]'``) and name that interpreter with ``python=`` or ``$CUDA_AGENT_LLAMA_PYTHON``.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent import procs
from cuda_agent.errors import ConfigError, CudaAgentError

log = logging.getLogger(__name__)

DEFAULT_MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
LLAMA_PYTHON_ENV = "CUDA_AGENT_LLAMA_PYTHON"
MODEL_ENV = "CUDA_AGENT_TEST_MODEL"


class ServerError(CudaAgentError):
    """The local model server could not be started or did not become ready."""


def default_model_path() -> Path:
    """``$CUDA_AGENT_TEST_MODEL``, else the file `scripts/fetch_test_model.sh` writes
    (``~/.cache/cuda-agent/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf``)."""
    if os.environ.get(MODEL_ENV):
        return Path(os.environ[MODEL_ENV]).expanduser()
    base = Path(os.environ.get("CUDA_AGENT_MODEL_DIR") or Path.home() / ".cache" / "cuda-agent" / "models")
    return base.expanduser() / DEFAULT_MODEL_FILE


def find_llama_python(explicit: str | None = None) -> str | None:
    """An interpreter that can run ``python -m llama_cpp.server``: ``explicit``, ``$CUDA_AGENT_LLAMA_PYTHON``, or
    this interpreter when it has ``llama_cpp``; None when there is none."""
    for candidate in (explicit, os.environ.get(LLAMA_PYTHON_ENV)):
        if candidate:
            return candidate if Path(candidate).exists() else None
    if importlib.util.find_spec("llama_cpp") is not None:
        return sys.executable
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LocalServerConfig:
    """How to start the server.

    Attributes:
        model: the GGUF file.
        port: TCP port on 127.0.0.1 (a free one when None).
        ctx: the context window in tokens (the agent's ``context_tokens`` should match it).
        threads: CPU threads for generation (llama.cpp's default when None).
        python: interpreter with ``llama-cpp-python[server]`` (see `find_llama_python`).
        model_name: the name the server answers to (``--model`` of the agent).
        startup_timeout_s: how long to wait for the model to load.
        log_path: where the server's output goes (a file beside nothing, in the temp folder, when None).
    """

    model: Path
    port: int | None = None
    ctx: int = 16384
    threads: int | None = None
    python: str | None = None
    model_name: str = "local"
    startup_timeout_s: float = 300.0
    log_path: Path | None = None

    def command(self, port: int, python: str) -> list[str]:
        cmd = [python, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(self.ctx), "--model_alias", self.model_name]
        if self.threads:
            cmd += ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        return cmd


class LocalModelServer:
    """``with LocalModelServer(LocalServerConfig(model=path)) as server: ... server.base_url ...``"""

    def __init__(self, config: LocalServerConfig) -> None:
        self.config = config
        self.port = config.port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = config.log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"cuda-agent-llm-{self.port}.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return self.config.model_name

    def start(self) -> "LocalModelServer":
        """Start the server and wait until it lists its model; raise `ConfigError` (nothing to run it with, no
        model file) or `ServerError` (it exited or did not answer in time; the log's tail is in the message)."""
        model = Path(self.config.model)
        if not model.is_file():
            raise ConfigError(f"{model}: no such model file; fetch the test model with scripts/fetch_test_model.sh "
                              "or pass a GGUF file")
        python = find_llama_python(self.config.python)
        if python is None:
            raise ConfigError(
                "llama-cpp-python is not installed: pip install 'llama-cpp-python[server]' (into any virtual "
                f"environment) and set {LLAMA_PYTHON_ENV} to that environment's python, or pass --python")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = self.config.command(self.port, python)
        log.info("starting the model server: %s (log %s)", " ".join(command), self.log_path)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        procs.register_group(self.proc.pid)  # its exit status stays its owner's; it ends with the command
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"the model server exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=5) as response:
                    if response.status == 200:
                        log.info("model server ready at %s", self.base_url)
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.5)
        raise ServerError(f"the model server did not answer within {self.config.startup_timeout_s:.0f} s:\n"
                          f"{self.log_tail()}")

    def models(self) -> list[str]:
        """The model names the server lists (GET /v1/models)."""
        with urllib.request.urlopen(self.base_url + "/models", timeout=10) as response:
            data: dict[str, Any] = json.loads(response.read().decode())
        return [str(m.get("id")) for m in data.get("data", [])]

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop the server's whole process group: SIGTERM, then SIGKILL after ``grace_s``."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
                procs.unregister_group(proc.pid)
                break
            except subprocess.TimeoutExpired:
                continue
        # anything left in the group (the server's own children) goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

