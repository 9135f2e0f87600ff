"""Results and trajectories: SQLite by default (or a SQL database by URL), a content-hash cache, resumable runs."""
from cuda_agent.store.keys import cache_key, files_digest, library_versions
from cuda_agent.store.schema import MIGRATIONS, SCHEMA_VERSION
from cuda_agent.store.store import DONE, ERROR, EvalRecord, RunJob, RunProgress, Store, default_store_url
from cuda_agent.store.url import StoreURL, parse_store_url

__all__ = [
    "DONE",
    "ERROR",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "EvalRecord",
    "RunJob",
    "RunProgress",
    "Store",
    "StoreURL",
    "cache_key",
    "default_store_url",
    "files_digest",
    "library_versions",
    "parse_store_url",
]
