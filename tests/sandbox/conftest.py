"""Fixtures for the sandbox tests: a workspace laid out as `cuda_agent.workspace` makes them, and a skip only
where bubblewrap cannot make namespaces (with bwrap's own reason)."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox import check_sandbox

PROTECTED_CONTENT = {
    "model.py": "import torch\nclass Model(torch.nn.Module):\n    pass\n",
    "binding.py": "ops = None\n",
    "SKILL.md": "# skill\n",
    "include/cuda_agent.h": "#pragma once\n",
    ".cuda_agent/manifest.json": '{"task": "t"}\n',
}


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    try:
        check_sandbox()
    except SandboxError as exc:
        pytest.skip(f"bubblewrap cannot run here: {exc}")


@pytest.fixture
def workspace(plain_workspace: Path, bwrap_ready: None) -> Path:
    return plain_workspace


@pytest.fixture
def plain_workspace(tmp_path: Path) -> Path:
    """The workspace, for tests that need no bubblewrap (the trusted local shell)."""
    ws = tmp_path / "episode-0"
    for rel, text in PROTECTED_CONTENT.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / "kernels").mkdir()
    (ws / "model_new.py").write_text("# agent\n")
    return ws


@pytest.fixture
def sibling(tmp_path: Path) -> Path:
    """Another episode's workspace next to ours, holding a secret."""
    other = tmp_path / "episode-1"
    other.mkdir()
    (other / "secret.txt").write_text(f"SIBLING-SECRET-{secrets.token_hex(8)}\n")
    return other


@pytest.fixture
def processes_with():
    """``processes_with(marker)``: host pids whose command line contains ``marker``."""
    return _processes_with


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found
