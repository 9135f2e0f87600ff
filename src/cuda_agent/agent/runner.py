"""Where the agent's bash commands and file tools run: a shell of `cuda_agent.sandbox` over the episode's workspace.

Two backends with the same verbs (``exec``, ``read_file``, ``write_file``) and the same protocol for the commands
SKILL.md names (``cuda-agent build|verify|profile|submit`` typed in bash reach the environment's handler through the
sandbox package's `Broker`): `Sandbox` (bubblewrap: no network, protected files read-only, escapes recorded) and
`TrustedLocalShell` (no confinement: for trusted use only, or a machine without bubblewrap that runs nothing else).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Protocol, Sequence

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox import BrokerReply, ExecResult, Sandbox, TrustedLocalShell, Violation
from cuda_agent.sandbox import sandbox_available as _bwrap_runs
from cuda_agent.workspace import PROTECTED_ROOTS

log = logging.getLogger(__name__)

CommandHandler = Callable[[str, list[str]], tuple[str, int]]
"""``handler(command, args) -> (text, exit_code)`` for ``cuda-agent <command> <args...>`` typed in bash."""

SHELL_MODES = ("auto", "bwrap", "local")


class Shell(Protocol):
    """What the environment needs of a shell (`Sandbox` and `TrustedLocalShell` are two)."""

    workspace: Path
    protected: tuple[str, ...]

    def exec(self, command: str | Sequence[str], timeout: float | None = None, *, cwd: str | None = None,
             input: str | bytes | None = None) -> ExecResult: ...

    def read_file(self, path: str) -> str: ...

    def write_file(self, path: str, content: str | bytes) -> None: ...

    @property
    def violations(self) -> tuple[Violation, ...]: ...

    def close(self) -> None: ...


def sandbox_available() -> bool:
    """Whether bubblewrap can run here (`cuda_agent.sandbox.sandbox_available`)."""
    return bool(_bwrap_runs())


def make_shell(mode: str, workspace: Path, handler: CommandHandler) -> Shell:
    """``bwrap``: the sandbox (raise `SandboxError` if it cannot run); ``local``: the trusted local shell;
    ``auto``: the sandbox where available, else the local shell (logged, since nothing is confined then)."""
    if mode not in SHELL_MODES:
        raise SandboxError(f"sandbox mode must be auto, bwrap or local, got {mode!r}")

    def answer(command: str, args: list[str], _workspace: Path) -> BrokerReply:
        text, code = handler(command, list(args))
        return BrokerReply(text=text, exit_code=code)

    if mode == "local":
        return TrustedLocalShell(workspace, protected=PROTECTED_ROOTS, broker=answer)
    if sandbox_available():
        return Sandbox(workspace, protected=PROTECTED_ROOTS, broker=answer)
    if mode == "bwrap":
        raise SandboxError(
            "the bubblewrap sandbox is not available here (bwrap is not installed or cannot create namespaces); "
            "install bubblewrap (apt-get install bubblewrap) or use sandbox='local' for trusted code only"
        )
    log.warning("sandbox not available; running agent commands UNCONFINED in a local shell over %s", workspace)
    return TrustedLocalShell(workspace, protected=PROTECTED_ROOTS, broker=answer)
