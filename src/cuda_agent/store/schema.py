"""The store's schema and its migrations.

The version lives in the ``schema_migrations`` table (one row per applied migration), not in a SQLite pragma, so
the same machinery works on a server database. Each migration is a list of statements in a neutral dialect:
``{pk}`` becomes the auto-increment primary key type and ``{real}`` the float type of the database.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cuda_agent.errors import StoreError


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL databases the store speaks to."""

    name: str
    placeholder: str
    pk: str
    real: str
    begin_write: str

    def sql(self, statement: str) -> str:
        """Rewrite a statement written with ``?`` placeholders and ``{pk}``/``{real}`` into this dialect."""
        text = statement.replace("{pk}", self.pk).replace("{real}", self.real)
        return text.replace("?", self.placeholder) if self.placeholder != "?" else text


SQLITE = Dialect("sqlite", "?", "INTEGER PRIMARY KEY AUTOINCREMENT", "REAL", "BEGIN IMMEDIATE")
POSTGRESQL = Dialect("postgresql", "%s", "BIGSERIAL PRIMARY KEY", "DOUBLE PRECISION", "BEGIN")
MYSQL = Dialect("mysql", "%s", "BIGINT AUTO_INCREMENT PRIMARY KEY", "DOUBLE", "BEGIN")
DIALECTS = {d.name: d for d in (SQLITE, POSTGRESQL, MYSQL)}

MIGRATIONS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        1,
        "evaluations, runs, run jobs and trajectories",
        (
            """CREATE TABLE evaluations (
                id {pk},
                cache_key VARCHAR(64) NOT NULL,
                job_id VARCHAR(128) NOT NULL,
                run_id VARCHAR(128),
                task_id VARCHAR(512) NOT NULL,
                kind VARCHAR(16) NOT NULL,
                gpu VARCHAR(128) NOT NULL,
                status VARCHAR(16) NOT NULL,
                result TEXT NOT NULL,
                created_at {real} NOT NULL)""",
            "CREATE INDEX ix_evaluations_key ON evaluations (cache_key, status)",
            "CREATE INDEX ix_evaluations_job ON evaluations (job_id)",
            "CREATE INDEX ix_evaluations_run ON evaluations (run_id, job_id)",
            """CREATE TABLE runs (
                run_id VARCHAR(128) PRIMARY KEY,
                meta TEXT NOT NULL,
                created_at {real} NOT NULL)""",
            """CREATE TABLE run_jobs (
                run_id VARCHAR(128) NOT NULL,
                job_id VARCHAR(128) NOT NULL,
                position INTEGER NOT NULL,
                cache_key VARCHAR(64) NOT NULL,
                job TEXT NOT NULL,
                PRIMARY KEY (run_id, job_id))""",
            """CREATE TABLE trajectories (
                episode_id VARCHAR(256) PRIMARY KEY,
                run_id VARCHAR(128),
                data TEXT NOT NULL,
                created_at {real} NOT NULL,
                updated_at {real} NOT NULL)""",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]

Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


def current_version(execute: Execute) -> int:
    rows = execute("SELECT MAX(version) FROM schema_migrations", ())
    return int(rows[0][0] or 0) if rows else 0


def migrate(
    execute: Execute,
    dialect: Dialect,
    migrations: Sequence[tuple[int, str, Sequence[str]]] = MIGRATIONS,
) -> int:
    """Apply the migrations the database lacks, inside the caller's write transaction; return the new version.

    Raises `StoreError` when the database was written by a newer cuda-agent (its version is above ours).
    """
    execute(
        dialect.sql(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
            "description TEXT NOT NULL, applied_at {real} NOT NULL)"
        ),
        (),
    )
    version = current_version(execute)
    latest = migrations[-1][0] if migrations else 0
    if version > latest:
        raise StoreError(
            f"the store has schema version {version} but this cuda-agent knows only up to {latest}; "
            "upgrade cuda-agent or open another store"
        )
    for number, description, statements in migrations:
        if number <= version:
            continue
        for statement in statements:
            execute(dialect.sql(statement), ())
        execute(
            dialect.sql("INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)"),
            (number, description, time.time()),
        )
        version = number
    return version
