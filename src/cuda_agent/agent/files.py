"""The file tools' implementation: read, write, edit, multi-edit, glob and grep, confined to one workspace.

Files are read and written through the episode's shell (`cuda_agent.agent.runner.Shell`: the sandbox, or the trusted
local shell), with its verbs ``read_file`` and ``write_file``: the same rules as everywhere (workspace only, protected
files read-only, the disk quota, refusals recorded) and files the sandbox's user owns. Paths are also checked here
first (resolved, symlinks followed, inside the workspace; not protected), so the agent reads a message that says
what to do instead. Violations raise `ToolError`, which the environment turns into an error observation.
"""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from cuda_agent.errors import CudaAgentError, SandboxError
from cuda_agent.workspace.workspace import is_protected

_SKIP_DIRS = {".cuda_agent", "__pycache__", ".git"}
_MAX_FILE_BYTES = 2_000_000


class ToolError(CudaAgentError):
    """A tool call could not be carried out; the message is shown to the agent as the tool's output."""


class WorkspaceFiles:
    """File operations on the workspace of ``shell`` (anything with ``workspace``, ``protected``, ``read_file`` and
    ``write_file``: `cuda_agent.sandbox.Sandbox`, `cuda_agent.sandbox.TrustedLocalShell`)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.root = Path(shell.workspace).resolve()
        self.protected = tuple(shell.protected)

    def resolve(self, path: str) -> Path:
        """The absolute path of ``path`` (relative to the workspace, or absolute inside it); raise `ToolError` if
        it leaves the workspace."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty string relative to the workspace, e.g. kernels/relu.cu")
        raw = Path(path.strip())
        candidate = raw if raw.is_absolute() else self.root / raw
        resolved = candidate.resolve()
        if resolved != self.root and self.root not in resolved.parents:
            raise ToolError(f"{path}: outside the workspace; only files under {self.root} can be used")
        return resolved

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def is_protected(self, path: Path) -> bool:
        return is_protected(self.relative(path), self.protected)

    def _writable(self, path: str) -> Path:
        resolved = self.resolve(path)
        if self.is_protected(resolved):
            raise ToolError(
                f"{self.relative(resolved)}: protected file (read-only); write your code in model_new.py and kernels/"
            )
        if resolved.is_dir():
            raise ToolError(f"{self.relative(resolved)}: is a folder, not a file")
        return resolved

    def _text(self, resolved: Path) -> str:
        if not resolved.exists():
            raise ToolError(f"{self.relative(resolved)}: no such file")
        if resolved.is_dir():
            raise ToolError(f"{self.relative(resolved)}: is a folder; use glob to list it")
        if resolved.stat().st_size > _MAX_FILE_BYTES:
            raise ToolError(f"{self.relative(resolved)}: larger than {_MAX_FILE_BYTES} bytes; use grep or bash head")
        try:
            return self.shell.read_file(self.relative(resolved))
        except UnicodeDecodeError as exc:
            raise ToolError(f"{self.relative(resolved)}: not a text file") from exc
        except (OSError, SandboxError) as exc:
            raise ToolError(f"{self.relative(resolved)}: {exc}") from exc

    def _put(self, resolved: Path, content: str) -> None:
        try:
            self.shell.write_file(self.relative(resolved), content)
        except (OSError, SandboxError) as exc:
            raise ToolError(f"{self.relative(resolved)}: {exc}") from exc

    def read(self, path: str, offset: int = 1, limit: int = 2000) -> str:
        resolved = self.resolve(path)
        lines = self._text(resolved).splitlines()
        if offset < 1 or limit < 1:
            raise ToolError("offset and limit must be positive (offset counts lines from 1)")
        chunk = lines[offset - 1 : offset - 1 + limit]
        width = len(str(offset + len(chunk)))
        body = "\n".join(f"{i:>{width}}\t{line}" for i, line in enumerate(chunk, start=offset))
        rest = len(lines) - (offset - 1 + len(chunk))
        if not lines:
            return f"{self.relative(resolved)} is empty"
        if rest > 0:
            body += f"\n[... {rest} more lines; read again with offset={offset + len(chunk)}]"
        return body

    def write(self, path: str, content: str) -> str:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        resolved = self._writable(path)
        existed = resolved.exists()
        self._put(resolved, content)
        verb = "overwrote" if existed else "created"
        return f"{verb} {self.relative(resolved)} ({len(content.splitlines())} lines, {len(content.encode())} bytes)"

    def edit(self, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        resolved = self._writable(path)
        text = _apply_edit(self._text(resolved), old_string, new_string, replace_all, self.relative(resolved))
        self._put(resolved, text)
        return f"edited {self.relative(resolved)}"

    def multi_edit(self, path: str, edits: Sequence[Mapping[str, object]]) -> str:
        resolved = self._writable(path)
        if not isinstance(edits, Sequence) or isinstance(edits, str) or not edits:
            raise ToolError("edits must be a non-empty list of {old_string, new_string[, replace_all]} objects")
        text = self._text(resolved)
        for number, item in enumerate(edits, start=1):
            if not isinstance(item, Mapping) or "old_string" not in item or "new_string" not in item:
                raise ToolError(f"edit {number}: needs old_string and new_string; no edit was applied")
            try:
                text = _apply_edit(
                    text,
                    str(item["old_string"]),
                    str(item["new_string"]),
                    bool(item.get("replace_all", False)),
                    self.relative(resolved),
                )
            except ToolError as exc:
                raise ToolError(f"edit {number} of {len(edits)}: {exc}; no edit was applied") from exc
        self._put(resolved, text)
        return f"applied {len(edits)} edits to {self.relative(resolved)}"

    def glob(self, pattern: str, limit: int = 500) -> str:
        if not pattern or Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolError("pattern must be relative to the workspace, e.g. kernels/*.cu or **/*.py")
        matches = sorted(
            self.relative(p) + ("/" if p.is_dir() else "")
            for p in self.root.glob(pattern)
            if self.root in p.resolve().parents and not set(p.relative_to(self.root).parts) & _SKIP_DIRS
        )
        if not matches:
            return f"no files match {pattern}"
        shown = matches[:limit]
        tail = f"\n[... {len(matches) - limit} more]" if len(matches) > limit else ""
        return "\n".join(shown) + tail

    def grep(self, pattern: str, path: str = ".", include: str = "", ignore_case: bool = False, limit: int = 200) -> str:
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"bad regular expression {pattern!r}: {exc}") from exc
        start = self.resolve(path)
        files = [start] if start.is_file() else sorted(_walk(start))
        hits: list[str] = []
        for file in files:
            if include and not fnmatch.fnmatch(file.name, include):
                continue
            try:
                if file.stat().st_size > _MAX_FILE_BYTES:
                    continue
                lines = self.shell.read_file(self.relative(file)).splitlines()
            except (UnicodeDecodeError, OSError, SandboxError):  # binary, gone, or a link out of the workspace
                continue
            for number, line in enumerate(lines, start=1):
                if regex.search(line):
                    hits.append(f"{self.relative(file)}:{number}: {line}")
                    if len(hits) > limit:
                        return "\n".join(hits[:limit]) + "\n[... more matches; narrow the pattern or path]"
        return "\n".join(hits) if hits else f"no matches for {pattern!r}"


def _walk(start: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        for name in filenames:
            yield Path(dirpath) / name


def _apply_edit(text: str, old: str, new: str, replace_all: bool, where: str) -> str:
    if not old:
        raise ToolError("old_string is empty; to create or overwrite a file use write")
    if old == new:
        raise ToolError("old_string and new_string are the same; nothing to change")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"{where}: old_string not found; read the file and copy the exact text, whitespace included")
    if count > 1 and not replace_all:
        raise ToolError(
            f"{where}: old_string occurs {count} times; add surrounding lines to make it unique or set replace_all"
        )
    return text.replace(old, new) if replace_all else text.replace(old, new, 1)
