"""A hostile task, and what it gets out of the commands that run task code (`cuda-agent eval`, `bench offline`, the
synthesis filters): no secret, no host file, no write, no connection may come out.

The task reads secret-looking environment variables and host files (canaries planted by `HostileSetup`, plus
/etc/shadow), lists ``$HOME/.ssh``, writes into ``$HOME``, the cache and the checkout, and connects to a port the
host listens on, at the module's top level, in ``get_init_inputs``, ``Model.__init__``, ``forward`` and
``get_inputs``. Whatever it gets it prints and raises (so it reaches any output there is). The host side decides
what leaked: a canary's value in any output, a file written, a connection accepted; it never believes the task.
"""
from __future__ import annotations

import json
import secrets
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SECRET_NAMES = ("OPENAI_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "CUDA_AGENT_SERVE_TOKEN")
PHASES = ("module", "get_init_inputs", "init", "forward", "get_inputs")

_TEMPLATE = '''
import os, socket
import torch
import torch.nn as nn

PLAN = __PLAN__
FOUND = []


def _probe(phase):
    for name in PLAN["env"]:
        value = os.environ.get(name)
        if value:
            FOUND.append(f"{phase} env {name}={value}")
    for path in PLAN["read"]:
        path = os.path.expanduser(path)
        try:
            if os.path.isdir(path):
                FOUND.append(f"{phase} list {path}: {sorted(os.listdir(path))}")
            else:
                with open(path, "rb") as fh:
                    FOUND.append(f"{phase} read {path}: {fh.read(64)!r}")
        except OSError:
            pass
    for path in PLAN["write"]:
        path = os.path.expanduser(path)
        try:
            with open(f"{path}.{phase}", "w") as fh:  # judged on the host (inside, a private tmpfs may take it)
                fh.write("written by task code")
        except OSError:
            pass
    try:
        with socket.create_connection(("127.0.0.1", PLAN["port"]), timeout=1) as conn:
            conn.sendall(phase.encode())
            FOUND.append(f"{phase} connected")
    except OSError:
        pass
    if FOUND:
        print("TASK-CODE-" + "GOT", FOUND, flush=True)


_probe("module")


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        _probe("init")

    def forward(self, x):
        _probe("forward")
        if FOUND:
            raise RuntimeError("TASK-CODE-" + f"GOT {FOUND}")
        return torch.relu(x) * 2.0


def get_inputs():
    _probe("get_inputs")
    return [torch.randn(__BATCH__, 64)]


def get_init_inputs():
    _probe("get_init_inputs")
    return []
'''

SOLUTION = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.relu(x) * 2.0\n")


@dataclass
class HostileSetup:
    """Canaries on the host: secret values in the environment, a fake home with an SSH key, a cache folder with a
    record, a file in the checkout's package folder, a listening port. Use as a context manager."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cuda-agent-hostile-")))
    secrets: dict[str, str] = field(default_factory=dict)
    connections: list[str] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        import cuda_agent

        self.home = self.root / "home"
        (self.home / ".ssh").mkdir(parents=True)
        self.cache = self.root / "cache"
        self.cache.mkdir()
        self.checkout = Path(cuda_agent.__file__).resolve().parent
        self.secrets = {name: f"canary-{name.lower()}-{secrets.token_hex(8)}" for name in SECRET_NAMES}
        self.file_canaries = {self.home / ".ssh" / "id_rsa": f"canary-ssh-{secrets.token_hex(8)}",
                              self.cache / "store.db": f"canary-store-{secrets.token_hex(8)}"}
        for path, value in self.file_canaries.items():
            path.write_text(value)
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.connections.append(conn.recv(64).decode(errors="replace"))
                except OSError:
                    self.connections.append("?")

    def __enter__(self) -> "HostileSetup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._listener.close()
        for path in self.write_targets():
            for phase in PHASES:
                Path(f"{path}.{phase}").unlink(missing_ok=True)

    def env(self) -> dict[str, str]:
        """The environment of the command under test: the secrets, the fake home, the cache."""
        return {**self.secrets, "HOME": str(self.home), "CUDA_AGENT_CACHE": str(self.cache),
                "XDG_CACHE_HOME": str(self.cache)}

    def read_targets(self) -> list[str]:
        return ["/etc/shadow", "~/.ssh", "~/.ssh/id_rsa", str(self.home / ".ssh" / "id_rsa"),
                str(self.cache / "store.db"), str(self.checkout / "__init__.py")]

    def write_targets(self) -> list[Path]:
        return [self.home / "written", self.cache / "written", self.checkout / "written"]

    def task_code(self, batch: int = 8) -> str:
        plan = {"env": list(SECRET_NAMES), "read": self.read_targets(),
                "write": [str(p) for p in self.write_targets()], "port": self.port}
        return _TEMPLATE.replace("__PLAN__", json.dumps(plan)).replace("__BATCH__", str(batch))

    def attempts_per_phase(self) -> dict[str, int]:
        """Attempts one probe makes: reads (environment names, files, listings) and connections, and writes."""
        return {"reads": len(SECRET_NAMES) + len(self.read_targets()) + 1, "writes": len(self.write_targets())}

    def assess(self, outputs: list[str], phases: int) -> dict[str, Any]:
        """What leaked into ``outputs`` (every text the command produced) and onto the host, for a task whose probe
        ran in ``phases`` phases (at least; the count of attempts is a lower bound)."""
        text = "\n".join(outputs)
        shadow = _shadow_head()
        leaked_reads = [name for name, value in self.secrets.items() if value in text]
        leaked_reads += [str(p) for p, value in self.file_canaries.items() if value in text]
        if shadow and shadow in text:
            leaked_reads.append("/etc/shadow")
        if "TASK-CODE-GOT" in text:
            leaked_reads.append("task code reported a success")
        written = [f"{p}.{phase}" for p in self.write_targets() for phase in PHASES if Path(f"{p}.{phase}").exists()]
        per = self.attempts_per_phase()
        reads = per["reads"] * phases
        return {"read_attempts": reads, "reads_leaked": len(leaked_reads) + len(self.connections),
                "reads_blocked": reads - len(leaked_reads) - len(self.connections),
                "write_attempts": per["writes"] * phases, "writes_succeeded": len(written),
                "leaks": leaked_reads, "connections": list(self.connections), "written": written}


def _shadow_head() -> str:
    try:
        with open("/etc/shadow", "rb") as fh:
            return repr(fh.read(64))[2:-1][:24]
    except OSError:
        return ""


def read_outputs(paths: list[Path]) -> list[str]:
    """Every file under ``paths`` as text (outputs to search for canaries)."""
    texts: list[str] = []
    for root in paths:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
        for path in files:
            try:
                texts.append(path.read_bytes().decode(errors="replace"))
            except OSError:
                continue
    return texts


__all__ = ["HostileSetup", "PHASES", "SECRET_NAMES", "SOLUTION", "read_outputs"]
