"""Blocked attempts, recognised in a command's text and its error output.

These complement the effect checks in `_monitor`: a read of a path that does not exist inside leaves no trace
but the error it caused, so the error text (naming the path) and the command text are what there is to record.
Only forbidden targets are matched (sensitive host paths, protected files, outside addresses), so ordinary
mistakes such as a missing file in the workspace are not reported.
"""
from __future__ import annotations

import re
from typing import Iterable

from cuda_agent.sandbox._limits import Violation

SENSITIVE_PATHS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root/.ssh", "/var/run/docker.sock",
                   "/run/docker.sock", "/proc/1/root", "/proc/1/environ", "/sys/fs/cgroup")
_PATH = r"(/[^\s:'\"`;|&<>()\u2018\u2019]+)"
_ERRNO_READ = r"(?:No such file or directory|Permission denied|Not a directory)"
_ERRNO_WRITE = r"(?:Read-only file system|Device or resource busy|Operation not permitted|Permission denied)"
_NETWORK = re.compile(
    r"Network is unreachable|Could not resolve host|Temporary failure in name resolution|Name or service not "
    r"known|No address associated with hostname|getaddrinfo failed|No route to host")
_FORK = re.compile(r"fork: (?:retry: )?Resource temporarily unavailable|Cannot fork|BlockingIOError: \[Errno 11\]"
                   r"|can't fork|fork failed")
_KILL = re.compile(r"kill: \(?\d+\)? ?-? ?(?:No such process|Operation not permitted)|ProcessLookupError"
                   r"|kill: .*(?:No such process|Operation not permitted)")
_ROFS = re.compile(_PATH + r"['\u2019]?: " + _ERRNO_WRITE)


def under(path: str, roots: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or lies inside one (the file verbs' protected-path check too)."""
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def scan(command: str, output: str, *, workspace_mount: str, protected: tuple[str, ...],
         sensitive: tuple[str, ...], writable: tuple[str, ...]) -> list[Violation]:
    """Violations evident from ``command`` and its combined ``output`` (see module docstring)."""
    found: list[Violation] = []

    def add(kind: str, detail: str, evidence: str) -> None:
        if not any(v.kind == kind and v.detail == detail for v in found):
            found.append(Violation(kind, detail, evidence))

    for path in (*SENSITIVE_PATHS, *sensitive):
        if path and path in command:
            add("read_outside", f"command names {path}", "command")
    for match in re.finditer(_PATH + r"['\u2019]?: " + _ERRNO_READ, output):
        path = match.group(1)
        if under(path, (*SENSITIVE_PATHS, *sensitive)):
            add("read_outside", f"{path}: {match.group(0).rsplit(': ', 1)[-1]}", "blocked")
    for match in _ROFS.finditer(output):
        path = match.group(1)
        rel = path[len(workspace_mount) + 1:] if path.startswith(workspace_mount + "/") else path
        if under(rel, protected) or any(rel == p.rstrip("/") for p in protected):
            add("protected_file", f"{path}: {match.group(0).rsplit(': ', 1)[-1]}", "blocked")
        elif "Read-only file system" in match.group(0) and not under(path, (workspace_mount, "/tmp", *writable)):
            add("write_outside", f"{path}: read-only", "blocked")
    for name in protected:
        name = name.rstrip("/")
        for errtext in ("Read-only file system", "Device or resource busy"):
            pattern = re.compile(r"['\"]?(?:\S*/)?" + re.escape(name) + r"['\"]?: (?:.*)?" + errtext)
            if pattern.search(output):
                add("protected_file", f"{name}: {errtext}", "blocked")
    if _NETWORK.search(output):
        add("network", _NETWORK.search(output).group(0), "blocked")  # type: ignore[union-attr]
    if _FORK.search(output):
        add("fork_bomb", _FORK.search(output).group(0), "blocked")  # type: ignore[union-attr]
    if "kill" in command and _KILL.search(output):
        add("kill_outside", _KILL.search(output).group(0), "blocked")  # type: ignore[union-attr]
    return found
