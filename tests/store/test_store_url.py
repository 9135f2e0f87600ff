"""Store URLs: SQLite forms, server databases, and a clear error when a driver is missing."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError, StoreError
from cuda_agent.store import Store, parse_store_url


def test_sqlite_forms() -> None:
    assert parse_store_url("sqlite:////abs/dir/s.db").path == Path("/abs/dir/s.db")
    assert parse_store_url("sqlite:///rel/s.db").path == Path("rel/s.db")
    assert parse_store_url("sqlite://:memory:").path == Path(":memory:")
    assert parse_store_url("plain/file.db").path == Path("plain/file.db")
    assert parse_store_url("plain/file.db").is_sqlite


def test_server_url_fields_and_redaction() -> None:
    url = parse_store_url("postgres://alice:s%40cret@db.example:6543/results?sslmode=require")
    assert (url.scheme, url.host, url.port, url.user, url.password, url.database) == (
        "postgresql", "db.example", 6543, "alice", "s@cret", "results")
    assert url.options == (("sslmode", "require"),)
    assert "s@cret" not in url.redacted() and "alice" in url.redacted()
    assert parse_store_url("mysql+pymysql://u@h/db").scheme == "mysql"


@pytest.mark.parametrize("bad", ["", "redis://h/db", "postgresql://host-only", "sqlite://relative", "postgresql://h:99x/db"])
def test_malformed_urls(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_store_url(bad)


def test_missing_driver_names_the_package(tmp_path: Path) -> None:
    if any(importlib.util.find_spec(n) for n in ("psycopg", "psycopg2")):
        pytest.skip("a PostgreSQL driver is installed here")
    with pytest.raises(StoreError, match="pip install psycopg"):
        Store.open("postgresql://u:pw@127.0.0.1:5432/db")


def test_in_memory_store_works() -> None:
    with Store.open("sqlite://:memory:") as store:
        store.put("k", {"x": 1}, job_id="j")
        assert store.get_record("k").result == {"x": 1}
