"""Store errors say what happened (damaged, not permitted, missing), and `Store.check` sees damage done to the file
while a store is open, which the open connection's cache hides."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cuda_agent
from cuda_agent.errors import StoreCorruptError, StoreMissingError
from cuda_agent.store import Store


def _filled(path: Path, n: int = 50) -> Path:
    with Store.open(path) as store:
        for i in range(n):
            store.put(f"k{i}", {"task_id": "t", "stage": "timed", "pad": "x" * 400}, job_id=f"j{i}")
    return path


def test_a_file_that_is_not_a_database_is_reported_as_damaged(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreCorruptError, match="the database is damaged .*move the file aside"):
        Store.open(path)


def test_a_folder_in_place_of_the_database_is_reported_as_missing(tmp_path: Path) -> None:
    (tmp_path / "store.db").mkdir()
    with pytest.raises(StoreMissingError, match="the path is a folder"):
        Store.open(tmp_path / "store.db")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to another user")
def test_a_database_this_user_cannot_write_is_reported_as_permissions(tmp_path: Path) -> None:
    src = str(Path(cuda_agent.__file__).resolve().parents[1])
    if os.stat(src).st_mode & 0o005 != 0o005:
        pytest.skip(f"{src} is not readable by other users")
    folder = tmp_path / "shared"
    folder.mkdir()
    _filled(folder / "store.db", 2)
    os.chmod(tmp_path, 0o755)
    os.chmod(folder, 0o755)
    os.chmod(folder / "store.db", 0o644)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from cuda_agent.store import Store\n"
            "from cuda_agent.errors import StorePermissionError\n"
            "try:\n    Store.open(sys.argv[2])\nexcept StorePermissionError as exc:\n    print('PERMISSION', exc)\n")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code,
                           src, str(folder / "store.db")], capture_output=True, text=True, timeout=60, cwd="/")
    assert "PERMISSION" in done.stdout, done.stdout + done.stderr
    assert "permission denied" in done.stdout and "read and write access" in done.stdout


@pytest.mark.parametrize("damage, kind", [("truncate_half", "corrupt"), ("truncate_zero", "corrupt"),
                                          ("overwrite_header", "corrupt"), ("delete", "missing"),
                                          ("replace", "missing")])
@pytest.mark.parametrize("deep", [True, False])
def test_check_sees_damage_done_while_open(tmp_path: Path, damage: str, kind: str, deep: bool) -> None:
    path = _filled(tmp_path / "store.db")
    store = Store.open(path)
    try:
        assert store.check().ok
        assert store.get_record("k3") is not None  # the connection has read pages: its cache is warm
        size = path.stat().st_size
        if damage == "truncate_half":
            os.truncate(path, size // 2)
        elif damage == "truncate_zero":
            os.truncate(path, 0)
        elif damage == "overwrite_header":
            with open(path, "r+b") as handle:
                handle.write(b"garbage garbage garbage")
        elif damage == "delete":
            path.unlink()
        else:
            path.rename(tmp_path / "old.db")
            path.write_bytes(b"")
        health = store.check(deep=deep)
    finally:
        store.close()
    assert not health.ok and health.kind == kind, health
    assert str(path) in (health.problem or "")
