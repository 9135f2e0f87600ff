"""What is wrong with a store, in words a user can act on: damaged, not permitted, or missing.

SQLite's own messages ("unable to open database file", "file is not a database") do not say which, and an open
connection keeps answering from its page cache and write-ahead log after its file was truncated or deleted, so
`check_sqlite` looks at the file itself through a fresh read-only connection.
"""
from __future__ import annotations

import errno
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.errors import StoreCorruptError, StoreError, StoreMissingError, StorePermissionError

SQLITE_HEADER = b"SQLite format 3\x00"
_CORRUPT = ("file is not a database", "malformed", "disk image", "no such table", "btreeinitpage", "corrupt")
_PERMISSION = ("readonly database", "read-only", "permission denied", "access permission")
_ADVICE = {
    StoreCorruptError: "move the file aside (keep it for recovery) and start with a new store, or restore a backup",
    StorePermissionError: "give this user read and write access to the file and its folder (SQLite also writes "
                          "-wal and -shm files next to it), or pick another --store",
    StoreMissingError: "check the path (the folder must exist or be creatable), or pick another --store",
}


@dataclass(frozen=True)
class StoreHealth:
    """The result of `Store.check`: ``ok``, else ``kind`` (``corrupt``, ``permissions``, ``missing`` or
    ``unavailable``) and ``problem`` in words."""

    url: str
    ok: bool
    kind: str | None = None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "ok": self.ok, "kind": self.kind, "problem": self.problem}


def _kind_of(exc: BaseException, path: Path | None) -> type[StoreError]:
    text = str(exc).lower()
    if isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (errno.EACCES, errno.EPERM):
        return StorePermissionError
    if any(marker in text for marker in _CORRUPT):
        return StoreCorruptError
    if any(marker in text for marker in _PERMISSION):
        return StorePermissionError
    if path is not None and ("unable to open" in text or isinstance(exc, OSError)):
        if path.is_dir():
            return StoreMissingError
        folder = path.parent
        if not folder.is_dir():
            return StoreMissingError
        if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.R_OK | os.W_OK)):
            return StorePermissionError
        if not path.exists():
            return StoreMissingError
    return StoreError


def classify(exc: BaseException, where: str, action: str, path: Path | None = None) -> StoreError:
    """A `StoreError` subclass for a database or OS error met while doing ``action`` on the store at ``where``:
    `StoreCorruptError`, `StorePermissionError`, `StoreMissingError`, or plain `StoreError` when the cause is
    something else (a full disk, a lock held too long); the message names the cause and what to do."""
    kind = _kind_of(exc, path)
    what = {StoreCorruptError: "the database is damaged", StorePermissionError: "permission denied",
            StoreMissingError: "the database or its folder is missing"}.get(kind, "a database error")
    if kind is StoreMissingError and path is not None and path.is_dir():
        what = "the path is a folder, not a database file"
    advice = _ADVICE.get(kind, "see the error above")
    return kind(f"store {where}: {action} failed: {what} ({exc}); {advice}")


def check_sqlite(url: str, path: Path, inode: tuple[int, int] | None, *, deep: bool = True) -> StoreHealth:
    """Check a SQLite store's file as it is now: present, the same file that was opened (``inode``: (st_dev,
    st_ino) at open), readable and writable, a SQLite header, no shorter than its header says, its evaluations
    table there, through a fresh read-only connection (so that no page cache hides damage); with ``deep`` also
    SQLite's quick integrity check, which reads the whole file."""
    if str(path) == ":memory:":
        return StoreHealth(url, True)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return StoreHealth(url, False, "missing", f"{path} was removed while the store was open; new results "
                                                  "go to a deleted file and are lost when it closes")
    except OSError as exc:
        return StoreHealth(url, False, "permissions", f"cannot stat {path}: {exc}")
    if inode is not None and (stat.st_dev, stat.st_ino) != inode:
        return StoreHealth(url, False, "missing", f"{path} was replaced by another file while the store was open")
    if not os.access(path, os.R_OK | os.W_OK):
        return StoreHealth(url, False, "permissions", f"{path} is not readable and writable by this user")
    problem = _header_problem(path, stat.st_size)
    if problem is None:
        problem = _integrity_problem(path, deep)
    if problem is not None:
        return StoreHealth(url, False, "corrupt", problem)
    return StoreHealth(url, True)


def _header_problem(path: Path, size: int) -> str | None:
    if size == 0:
        return None
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot read {path}: {exc}"
    if head != SQLITE_HEADER[: len(head)] or len(head) < len(SQLITE_HEADER):
        return f"{path} does not start with SQLite's header (overwritten or truncated)"
    expected = _size_in_header(path)
    if expected is not None and size < expected:
        return f"{path} is {size} bytes but its header says {expected} (truncated)"
    return None


def _size_in_header(path: Path) -> int | None:
    """The database size SQLite's header records (page size x page count), when the header says it is valid."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except OSError:
        return None
    if len(header) < 100:
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]
    return page_size * pages if valid and pages else None


def _integrity_problem(path: Path, deep: bool) -> str | None:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return f"cannot open {path} read-only: {exc}"
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "evaluations" not in tables:
            return f"{path} has no evaluations table (truncated or emptied while open)"
        conn.execute("SELECT MAX(id) FROM evaluations").fetchone()
        verdict = conn.execute("PRAGMA quick_check(1)").fetchone()[0] if deep else "ok"
        if verdict != "ok":
            return f"{path} failed SQLite's integrity check: {verdict.strip().splitlines()[-1]}"
    except sqlite3.Error as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None  # another process is writing: not damage
        return f"{path} cannot be read: {exc}"
    finally:
        conn.close()
    return None
