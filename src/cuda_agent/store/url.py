"""Parse store URLs: ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://:memory:``, a plain path,
or another SQL database (``postgresql://user:pw@host:5432/db``, ``mysql://...``).

The convention for SQLite follows the one most Python tools use: three slashes then a relative path, four slashes
for an absolute path.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from cuda_agent.errors import ConfigError, StoreError

_DRIVERS: dict[str, tuple[str, ...]] = {
    "postgresql": ("psycopg", "psycopg2"),
    "mysql": ("pymysql", "MySQLdb"),
}
_ALIASES = {"postgres": "postgresql", "postgresql+psycopg": "postgresql", "postgresql+psycopg2": "postgresql",
            "mysql+pymysql": "mysql"}


@dataclass(frozen=True)
class StoreURL:
    """A parsed store location.

    Attributes:
        scheme: ``sqlite``, ``postgresql`` or ``mysql``.
        path: the SQLite file (``:memory:`` for an in-memory store); None for server databases.
        host, port, user, password, database: server connection fields.
        options: query-string options (``?sslmode=require``), first value of each.
    """

    scheme: str
    path: Path | None = None
    host: str | None = None
    port: int | None = None
    user: str | None = None
    password: str | None = None
    database: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @property
    def is_sqlite(self) -> bool:
        return self.scheme == "sqlite"

    def redacted(self) -> str:
        """The URL without its password, for logs and error messages."""
        if self.is_sqlite:
            return f"sqlite:///{self.path}"
        auth = f"{self.user}:***@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{self.scheme}://{auth}{self.host or ''}{port}/{self.database or ''}"


def parse_store_url(url: str | Path) -> StoreURL:
    """Parse ``url``; a string without ``://`` is taken as a SQLite file path.

    Raises `ConfigError` for an unknown scheme or a malformed URL.
    """
    text = str(url).strip()
    if not text:
        raise ConfigError("empty store URL; use sqlite:///path/to/store.db or a file path")
    if "://" not in text:
        return StoreURL("sqlite", path=Path(text).expanduser())
    scheme, rest = text.split("://", 1)
    scheme = _ALIASES.get(scheme.lower(), scheme.lower())
    if scheme == "sqlite":
        if rest in (":memory:", "/:memory:"):
            return StoreURL("sqlite", path=Path(":memory:"))
        if not rest.startswith("/") or rest == "/":
            raise ConfigError(f"store URL {text!r}: write sqlite:///relative.db or sqlite:////absolute/path.db")
        return StoreURL("sqlite", path=Path(rest[1:]).expanduser())
    if scheme not in _DRIVERS:
        raise ConfigError(
            f"store URL {text!r}: unknown scheme {scheme!r}; use sqlite, postgresql or mysql"
        )
    parts = urlsplit(f"{scheme}://{rest}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"store URL {text!r}: bad port ({exc})") from exc
    database = parts.path.lstrip("/") or None
    if not parts.hostname or not database:
        raise ConfigError(f"store URL {text!r}: needs a host and a database name, e.g. {scheme}://user@host/db")
    options = tuple((k, v[0]) for k, v in sorted(parse_qs(parts.query).items()))
    return StoreURL(
        scheme,
        host=parts.hostname,
        port=port,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        database=database,
        options=options,
    )


def load_driver(url: StoreURL):  # noqa: ANN201 - a DB-API module
    """Import the DB-API driver for a server database, or raise `StoreError` saying which package to install."""
    names = _DRIVERS.get(url.scheme, ())
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise StoreError(
        f"store {url.redacted()}: no driver for {url.scheme} is installed (tried {', '.join(names)}); "
        f"install one (pip install {names[0]}) or use a SQLite store (sqlite:///path.db)"
    )
