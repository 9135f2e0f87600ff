"""Effect checks: what a command actually did, measured from the host.

Canary files watched with inotify (an open of a decoy is a read attempt, however the path was spelled), the
network namespace's no-route counters, protected-file checksums, workspace disk use and process counts.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import itertools
import logging
import os
import stat
import struct
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

IN_ACCESS = 0x001
IN_OPEN = 0x020
_EVENT = struct.Struct("iIII")


class _Inotify:
    """One inotify instance for the whole process (the kernel allows a user only ~128 instances, and a host runs
    many sandboxes); events are sorted to their owners by watch descriptor."""

    _instance: "_Inotify | None" = None
    _guard = threading.Lock()

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.lock = threading.Lock()
        self.owner: dict[int, tuple[int, str]] = {}
        self.pending: dict[int, list[str]] = {}

    @classmethod
    def get(cls) -> "_Inotify":
        with cls._guard:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def add(self, owner: int, path: Path, name: str) -> int:
        with self.lock:
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch failed for {path}")
            self.owner[wd] = (owner, name)
            return wd

    def remove(self, wds: list[int]) -> None:
        with self.lock:
            for wd in wds:
                self.libc.inotify_rm_watch(self.fd, wd)
                self.owner.pop(wd, None)

    def take(self, owner: int) -> list[str]:
        with self.lock:
            while True:
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    break
                offset = 0
                while offset + _EVENT.size <= len(data):
                    wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
                    offset += _EVENT.size + length
                    if wd in self.owner:
                        who, name = self.owner[wd]
                        self.pending.setdefault(who, []).append(name)
            return self.pending.pop(owner, [])


class CanaryWatch:
    """inotify watches on decoy files and folders shown inside the sandbox at sensitive paths (/etc/shadow ...).

    fsnotify marks belong to the inode, so an open through the sandbox's bind mount is seen here. Opens made
    with O_PATH (bubblewrap's own mount setup) do not count. Where inotify is unavailable the decoys stay but
    are not watched (logged).
    """

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self._id = next(self._ids)
        self._wds: list[int] = []
        try:
            self._inotify: _Inotify | None = _Inotify.get()
        except OSError as exc:
            log.warning("inotify unavailable (%s): decoy files will not be watched", exc)
            self._inotify = None

    def watch(self, host_path: Path, inside: str) -> None:
        if self._inotify is None:
            return
        try:
            self._wds.append(self._inotify.add(self._id, host_path, inside))
        except OSError as exc:
            log.warning("cannot watch decoy %s: %s", inside, exc)

    def opened(self) -> list[str]:
        """Inside paths opened since the last call, each once."""
        if self._inotify is None:
            return []
        return list(dict.fromkeys(self._inotify.take(self._id)))

    def close(self) -> None:
        if self._inotify is not None and self._wds:
            self._inotify.remove(self._wds)
            self._inotify.take(self._id)
            self._wds = []


def no_route_packets(report: str) -> int:
    """Sum of IPv4 and IPv6 OutNoRoutes in /proc/net/snmp{,6} text: each is a packet or connect aimed outside
    (the sandbox's network namespace has only loopback). The largest value of each counter wins, so text a
    command forges into the report can only add, never hide."""
    best_v4 = best_v6 = 0
    lines = report.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("Ip: ") and lines[i + 1].startswith("Ip: "):
            header, values = line.split()[1:], lines[i + 1].split()[1:]
            if "OutNoRoutes" in header and len(values) == len(header) and values[0].isdigit():
                try:
                    best_v4 = max(best_v4, int(values[header.index("OutNoRoutes")]))
                except ValueError:
                    pass
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "Ip6OutNoRoutes" and parts[1].isdigit():
            best_v6 = max(best_v6, int(parts[1]))
    return best_v4 + best_v6


def disk_usage(root: Path, skip: tuple[Path, ...] = ()) -> int:
    """Bytes allocated by the files under ``root`` (not following symlinks), skipping ``skip`` folders."""
    total = 0
    stack = [str(root)]
    skipped = {str(s) for s in skip}
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.path not in skipped:
                            stack.append(entry.path)
                    else:
                        st = entry.stat(follow_symlinks=False)
                        total += max(st.st_size if st.st_blocks == 0 else 0, st.st_blocks * 512)
                except OSError:
                    continue
    return total


def unsafe_entries(root: Path, allowed_targets: tuple[str, ...], skip: tuple[Path, ...] = ()) -> list[tuple[Path, str]]:
    """Entries under ``root`` that would hurt host-side code reading the workspace: symlinks that resolve, as the
    host sees them, outside the workspace and outside ``allowed_targets`` (the read-only toolchain, the same on
    both sides), which a host reader would follow to the host's real file (``/tmp/x`` or ``/workspace/x`` mean
    other things on the host), and FIFOs, sockets or devices, on which a host reader would block."""
    found: list[tuple[Path, str]] = []
    root_text = str(root)
    skipped = {str(s) for s in skip}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skipped]
        for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                inside_ws = target == root_text or target.startswith(root_text + os.sep)
                allowed = any(target == a or target.startswith(a.rstrip("/") + "/") for a in allowed_targets)
                if not inside_ws and not allowed:
                    found.append((Path(path), f"symlink to {os.readlink(path)}"))
            elif stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode) or stat.S_ISCHR(st.st_mode) \
                    or stat.S_ISBLK(st.st_mode):
                found.append((Path(path), "special file (FIFO, socket or device)"))
    return found


def digest(path: Path) -> str | None:
    """sha256 of a file, of a folder's files (names and contents), or None when it is missing."""
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if path.is_dir():
        h = hashlib.sha256()
        for sub in sorted(path.rglob("*")):
            h.update(str(sub.relative_to(path)).encode() + b"\0")
            if sub.is_file() and not sub.is_symlink():
                h.update(sub.read_bytes())
        return "dir:" + h.hexdigest()
    return None


class UidLease:
    """A host uid used by one ``setuid`` sandbox only, held by an flock on a lock file for its lifetime (so two
    sandboxes, even in different processes, never share a process limit)."""

    FIRST = 420_000
    COUNT = 60_000

    def __init__(self) -> None:
        lock_dir = Path(tempfile.gettempdir()) / "cuda-agent-sandbox-uids"
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        start = (os.getpid() * 7919 + id(self)) % self.COUNT
        for step in range(self.COUNT):
            uid = self.FIRST + (start + step) % self.COUNT
            fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            self.uid = uid
            self._fd = fd
            return
        raise OSError(errno.EAGAIN, f"no free sandbox uid in {lock_dir}")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def chown_tree(root: Path, uid: int, skip: set[Path]) -> None:
    """Give ``root`` and everything under it (except ``skip``) to ``uid`` so a ``setuid`` sandbox can write."""
    os.chown(root, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d not in skip]
        for name in [*dirnames, *filenames]:
            if here / name in skip:
                continue
            try:
                os.chown(here / name, uid, uid, follow_symlinks=False)
            except OSError as exc:
                log.debug("cannot chown %s: %s", here / name, exc)
