"""The SQLite store: round trips, the cache's rules, schema versions and migrations, runs and trajectories."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cuda_agent.errors import StoreError
from cuda_agent.store import (
    DONE,
    ERROR,
    MIGRATIONS,
    SCHEMA_VERSION,
    RunJob,
    Store,
    cache_key,
    files_digest,
)
from cuda_agent.store.schema import SQLITE, migrate


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


def test_put_get_survives_reopen_and_serves_only_done(tmp_path: Path) -> None:
    with Store.open(_url(tmp_path)) as store:
        assert store.schema_version == SCHEMA_VERSION
        store.put("k1", {"stage": "timed", "speedup": 1.5}, job_id="j1", task_id="L1/19", kind="full", gpu="H200")
        store.put("k2", {"reason": "worker crashed"}, job_id="j2", status=ERROR)
    with Store.open(_url(tmp_path)) as store:
        record = store.get_record("k1")
        assert record is not None and record.result == {"stage": "timed", "speedup": 1.5}
        assert (record.job_id, record.task_id, record.kind, record.gpu, record.status) == (
            "j1", "L1/19", "full", "H200", DONE)
        assert store.get_record("k2") is None, "an infrastructure error must not be served from the cache"
        assert store.record_for_job("j2").status == ERROR
        store.put("k1", {"stage": "timed", "speedup": 2.0}, job_id="j3")
        assert store.get_record("k1").result["speedup"] == 2.0, "the latest done evaluation wins"
        assert store.count() == 3 and store.count(DONE) == 2


def test_cache_key_changes_with_each_input() -> None:
    versions = {"torch": "2.11", "cuda_agent": "0.1.0"}
    base = dict(task_code="class Model: pass", solution_files={"model_new.py": b"x"}, gpu="H200",
                settings={"kind": "full"}, versions=versions)
    key = cache_key(**base)
    assert key == cache_key(**base)
    assert len(key) == 64
    variants = [
        {"task_code": "class Model: pass  # changed"},
        {"solution_files": {"model_new.py": b"y"}},
        {"solution_files": {"kernels/model_new.py": b"x"}},
        {"gpu": "A100"},
        {"settings": {"kind": "verify"}},
        {"versions": {"torch": "2.12", "cuda_agent": "0.1.0"}},
    ]
    for change in variants:
        assert cache_key(**{**base, **change}) != key, change
    assert cache_key(**{**base, "solution_files": files_digest({"model_new.py": b"x"})}) == key


def test_wal_mode_and_newer_schema_refused(tmp_path: Path) -> None:
    Store.open(_url(tmp_path)).close()
    conn = sqlite3.connect(tmp_path / "store.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'from the future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="schema version 999"):
        Store.open(_url(tmp_path))


def test_a_new_migration_is_applied_once_and_keeps_data(tmp_path: Path) -> None:
    with Store.open(_url(tmp_path)) as store:
        store.put("k", {"v": 1}, job_id="j")
    extra = (*MIGRATIONS, (SCHEMA_VERSION + 1, "add a note column",
                           ("ALTER TABLE evaluations ADD COLUMN note TEXT",)))
    for _ in range(2):
        with Store.open(_url(tmp_path), migrations=extra) as store:
            assert store.schema_version == SCHEMA_VERSION + 1
            assert store.get_record("k").result == {"v": 1}
    conn = sqlite3.connect(tmp_path / "store.db")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(evaluations)")]
    assert columns.count("note") == 1
    assert migrate(lambda s, p: conn.execute(s, p).fetchall(), SQLITE, extra) == SCHEMA_VERSION + 1


def test_runs_register_idempotently_and_report_progress(tmp_path: Path) -> None:
    jobs = [RunJob(f"j{i}", i, f"key{i}", {"job_id": f"j{i}"}) for i in range(4)]
    with Store.open(_url(tmp_path)) as store:
        store.begin_run("r1", jobs[:3], {"purpose": "test"})
        store.begin_run("r1", jobs, {})
        assert [j.job_id for j in store.run_jobs("r1")] == ["j0", "j1", "j2", "j3"]
        store.put("key1", {"ok": True}, job_id="j1", run_id="r1")
        store.put("key2", {"reason": "crash"}, job_id="j2", run_id="r1", status=ERROR)
        store.put("key3", {"ok": True}, job_id="j3", run_id="other")
        progress = store.run_progress("r1")
        assert progress.total == 4 and progress.finished == {"j1"}
        assert [j.job_id for j in progress.pending] == ["j0", "j2", "j3"]
        with pytest.raises(StoreError, match="other content"):
            store.begin_run("r1", [RunJob("j0", 0, "different-key", {})])
        assert store.runs() == ["r1"]


def test_trajectories_insert_replace_and_list(tmp_path: Path) -> None:
    with Store.open(_url(tmp_path)) as store:
        store.put_trajectory("ep-1", {"turns": [1]}, run_id="r")
        store.put_trajectory("ep-2", {"turns": []})
        store.put_trajectory("ep-1", {"turns": [1, 2]}, run_id="r")
        assert store.get_trajectory("ep-1") == {"turns": [1, 2]}
        assert store.get_trajectory("missing") is None
        assert store.trajectory_ids() == ["ep-1", "ep-2"]
        assert store.trajectory_ids(run_id="r") == ["ep-1"]
        assert dict(store.iter_trajectories()) == {"ep-1": {"turns": [1, 2]}, "ep-2": {"turns": []}}


def test_closed_store_and_bad_values_raise(tmp_path: Path) -> None:
    store = Store.open(_url(tmp_path))
    with pytest.raises(StoreError, match="status"):
        store.put("k", {}, status="maybe")
    with pytest.raises(StoreError, match="to_dict"):
        store.put("k", object())
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_record("k")


def test_unwritable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="opening failed: the database or its folder is missing"):
        Store.open(f"sqlite:///{blocker}/sub/store.db")
