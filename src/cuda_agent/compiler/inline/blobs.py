"""A content-addressed store for build outputs: files named by their sha256, found through a key index.

``blobs/<sha256><suffix>`` holds the bytes; ``index/<key>.json`` maps a build key (the hash of everything that went
into the build) to the blob's hash. Reading checks that the blob still hashes to its name, so a truncated or
altered file is found, removed and rebuilt instead of loaded. Rationale: the cache is shared by every build and
every candidate process on the machine; only the trusted builder writes it (`put`), after the compiler (which may
run candidate-controlled text in a sandbox) has finished in a private folder, so a candidate can neither plant an
object for another solution nor have a half-written one picked up.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _move(src: Path, dst: Path) -> None:
    """Rename when the two folders share a file system, else copy (the build folder may be a tmpfs)."""
    try:
        os.replace(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


class BlobCache:
    """Content-addressed files under ``root`` with an index of build keys.

    ``verify="always"`` hashes a blob on every `get`; ``"once"`` (default) hashes it the first time this process
    reads it at a given size and modification time (PCH files are hundreds of MB and read by every build).
    """

    def __init__(self, root: str | Path, *, verify: str = "once") -> None:
        self.root = Path(root)
        self.verify = verify
        self._verified: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def _index(self, key: str) -> Path:
        return self.root / "index" / f"{key}.json"

    def _check(self, path: Path, sha: str) -> bool:
        try:
            st = path.stat()
        except OSError:
            return False
        stamp = (st.st_size, st.st_mtime_ns)
        with self._lock:
            if self.verify == "once" and self._verified.get(str(path)) == stamp:
                return True
        ok = sha256_file(path) == sha
        if ok:
            with self._lock:
                self._verified[str(path)] = stamp
        return ok

    def _remember(self, path: Path) -> None:
        st = path.stat()
        with self._lock:
            self._verified[str(path)] = (st.st_size, st.st_mtime_ns)

    def meta(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._index(key).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("sha256"), str) else None

    def get(self, key: str, *, repair: bool = True) -> Path | None:
        """The verified blob for ``key``, or None. A blob whose content no longer matches its hash is reported and,
        with ``repair``, removed along with its index entry so that the caller rebuilds it."""
        data = self.meta(key)
        if data is None:
            return None
        path = self.root / data["path"]
        if self._check(path, data["sha256"]):
            return path
        log.warning("cached build output %s for key %s fails its sha256 check; rebuilding it", path, key[:16])
        if repair:
            for stale in (path, self._index(key)):
                with contextlib.suppress(OSError):
                    if stale.is_dir():
                        shutil.rmtree(stale)
                    else:
                        stale.unlink()
        return None

    def put(self, key: str, src: Path, *, suffix: str = "", meta: dict[str, Any] | None = None) -> Path:
        """Move the file ``src`` into the store under its content hash and index it by ``key``; return its path."""
        sha = sha256_file(src)
        final = self.root / "blobs" / f"{sha}{suffix}"
        final.parent.mkdir(parents=True, exist_ok=True)
        if not (final.exists() and self._check(final, sha)):
            tmp = final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            _move(src, tmp)
            os.replace(tmp, final)
            self._remember(final)
        self._write_index(key, {"sha256": sha, "path": f"blobs/{final.name}", **(meta or {})})
        return final

    def alias(self, key: str, existing: str) -> None:
        """Index ``key`` to the blob already indexed as ``existing`` (one object serving several keys)."""
        data = self.meta(existing)
        if data is None:
            raise KeyError(existing)
        self._write_index(key, data)

    def put_pch(self, key: str, header: Path, gch: Path, meta: dict[str, Any] | None = None) -> Path:
        """Store a precompiled header (the header and its ``.gch`` side by side, as gcc looks for them) in a
        folder named by the .gch's hash; return the header's path (pass it to ``-include``)."""
        sha = sha256_file(gch)
        folder = self.root / "pch" / sha
        target = folder / header.name
        if not (target.with_name(gch.name).exists() and self._check(target.with_name(gch.name), sha)):
            self._mkdir(folder.parent)
            tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}.", dir=folder.parent))
            shutil.copyfile(header, tmp / header.name)
            _move(gch, tmp / gch.name)
            if folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
            self._remember(folder / gch.name)
        self._write_index(key, {"sha256": sha, "path": f"pch/{sha}/{gch.name}", "header": header.name,
                                **(meta or {})})
        return target

    @staticmethod
    def _mkdir(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _write_index(self, key: str, data: dict[str, Any]) -> None:
        index = self._index(key)
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_name(f".{index.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, index)

    @contextlib.contextmanager
    def locked(self, key: str) -> Iterator[None]:
        """An exclusive lock on ``key`` across processes (so two processes do not build one PCH twice)."""
        path = self.root / "locks" / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
