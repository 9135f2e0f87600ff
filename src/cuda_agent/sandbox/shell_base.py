"""`WorkspaceShell`: what both shells over a workspace share (`cuda_agent.sandbox.Sandbox` and
`cuda_agent.sandbox.TrustedLocalShell`): the file verbs ``read_file`` and ``write_file``, one implementation so that
the rules a file tool meets do not depend on which shell runs the agent's commands (only files under the workspace,
never a protected one, never past the disk quota, every refusal recorded as a violation), and the lifetime (``close``,
``with``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Self, Sequence

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox._detect import under
from cuda_agent.sandbox._limits import SandboxLimits, Violation

MAX_READ_BYTES = 16 << 20


class WorkspaceShell:
    """The file verbs and the lifetime, over the attributes a shell sets up: ``workspace`` (host folder), ``workspace_mount`` (its
    path as the commands see it), ``protected`` (workspace-relative; a folder ends in ``/``), ``limits`` and
    ``_usage`` (the workspace's size in bytes, kept current). Subclasses record violations in ``_record`` and may
    hand written paths to the command's user in ``_owned``."""

    workspace: Path
    workspace_mount: str
    protected: tuple[str, ...]
    limits: SandboxLimits
    _usage: int

    def _record(self, violations: list[Violation], command: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _owned(self, paths: Sequence[Path]) -> None:
        """Paths the host just created for the agent (the new file and any folders made for it)."""

    def _host_path(self, path: str, verb: str) -> Path:
        rel = path[len(self.workspace_mount) + 1:] if path.startswith(self.workspace_mount + "/") else path
        if rel.startswith("/") or not rel:
            self._record([Violation("read_outside" if verb == "read" else "write_outside",
                                    f"{verb}_file({path!r}) outside {self.workspace_mount}", "api")], path)
            raise PermissionError(f"{path}: only files under {self.workspace_mount} can be {verb}")
        host = (self.workspace / rel).resolve()
        if host != self.workspace and not str(host).startswith(str(self.workspace) + os.sep):
            self._record([Violation("read_outside" if verb == "read" else "write_outside",
                                    f"{verb}_file({path!r}) resolves outside the workspace", "api")], path)
            raise PermissionError(f"{path}: resolves outside {self.workspace_mount} (a symlink?)")
        return host

    def read_file(self, path: str) -> str:
        """Text of a workspace file (``path`` relative to the workspace, or absolute under its mount).

        Raises:
            PermissionError: the path lies outside the workspace (also through a symlink); recorded.
            FileNotFoundError / IsADirectoryError: as the names say.
            UnicodeDecodeError: the file is not UTF-8 text.
            SandboxError: the file is larger than 16 MiB.
        """
        host = self._host_path(path, "read")
        if host.is_dir():
            raise IsADirectoryError(f"{path} is a folder")
        size = host.stat().st_size
        if size > MAX_READ_BYTES:
            raise SandboxError(f"{path} is {size} bytes, more than read_file's {MAX_READ_BYTES}; read part of it "
                               "with exec('head -c ...')")
        return host.read_bytes().decode("utf-8")

    def write_file(self, path: str, content: str | bytes) -> None:
        """Create or replace a workspace file, making its folders.

        Raises:
            PermissionError: the path is protected or lies outside the workspace; recorded.
            IsADirectoryError: the path is a folder.
            SandboxError: the write would take the workspace past its disk quota.
        """
        host = self._host_path(path, "write")
        rel = host.relative_to(self.workspace).as_posix()
        if under(rel.strip("/"), [root.strip("/") for root in self.protected]):
            self._record([Violation("protected_file", f"write_file({path!r}): protected", "api")], path)
            raise PermissionError(f"{rel} is protected; write model_new.py or files under kernels/")
        if host.is_dir():
            raise IsADirectoryError(f"{path} is a folder")
        data = content.encode() if isinstance(content, str) else content
        quota = self.limits.disk_quota_bytes
        old = host.stat().st_size if host.exists() else 0
        if quota is not None and self._usage - old + len(data) > quota:
            raise SandboxError(f"writing {len(data)} bytes to {rel} would take the workspace past its {quota}-byte "
                               "disk quota; delete files first")
        missing = [p for p in reversed(host.parents) if not p.exists()]
        host.parent.mkdir(parents=True, exist_ok=True)
        host.write_bytes(data)
        self._owned([*missing, host])
        self._usage += len(data) - old
