"""Fetch the public task sets from the Hugging Face hub into the local cache, once: KernelBench (levels 1-3) as a
folder of task files, the layout of a KernelBench checkout, and CUDA-Agent-Ops-6K as one parquet file.

A machine that cannot reach the hub gets one `TaskError` line within a few seconds: the hub is probed once with a
short timeout before any download, since the hub client otherwise retries for about 25 s, logging each retry.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from cuda_agent.errors import TaskError
from cuda_agent.locations import kernelbench_cache, ops6k_cache

KERNELBENCH_HUB_ID = "ScalingIntelligence/KernelBench"
OPS6K_HUB_ID = "BytedTsinghua-SIA/CUDA-Agent-Ops-6K"
KERNELBENCH_LEVELS = (1, 2, 3)
PROBE_TIMEOUT_S = 5.0

Rows = list[dict[str, Any]]


def hub_endpoint() -> str:
    """The hub's address: ``$HF_ENDPOINT``, else the hub client's default."""
    env = os.environ.get("HF_ENDPOINT")
    if env:
        return env.rstrip("/")
    try:
        from huggingface_hub import constants
    except ImportError as exc:
        raise TaskError("the hub needs the 'huggingface_hub' package: pip install 'cuda-agent[hub]'") from exc
    return constants.ENDPOINT.rstrip("/")


def check_hub_reachable(repo_id: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Ask the hub about ``repo_id`` once, with a short timeout; raise a one-line `TaskError` saying what to do
    when the hub is switched off, unreachable, or has no such dataset."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        raise TaskError(f"{repo_id}: HF_HUB_OFFLINE is set, so the hub is not asked; unset it, or "
                        f"{_local_copy_hint(repo_id)}")
    endpoint = hub_endpoint()
    request = urllib.request.Request(f"{endpoint}/api/datasets/{repo_id}", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise TaskError(f"{repo_id}: no such dataset on the hub at {endpoint}") from exc
        return  # the hub answered; what the status means is the download's business
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TaskError(f"cannot reach the hub at {endpoint} ({reason}) to fetch {repo_id}; connect this machine, "
                        f"or {_local_copy_hint(repo_id)}") from exc


def _local_copy_hint(repo_id: str) -> str:
    if repo_id == KERNELBENCH_HUB_ID:
        return "copy KernelBench here and set CUDA_AGENT_KERNELBENCH to its folder (the one holding level1/)"
    if repo_id == OPS6K_HUB_ID:
        return "copy the Ops-6K parquet file here and pass its path"
    return "copy the dataset here and pass the local file or folder"


@contextlib.contextmanager
def _quiet_hub() -> Iterator[None]:
    """Silence the hub client's and the datasets library's warnings (retries, cache notes) for the block."""
    names = ("huggingface_hub", "datasets", "fsspec")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def download_splits(repo_id: str, split: str | None = None) -> dict[str, Rows]:
    """Every split of a hub dataset (or only ``split``) as plain rows; needs ``datasets`` and the network."""
    check_hub_reachable(repo_id)
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError as exc:
        raise TaskError(f"loading {repo_id} from the hub needs the 'datasets' package: pip install "
                        "'cuda-agent[hub]'") from exc
    with _quiet_hub():
        try:
            data = datasets.load_dataset(repo_id, split=split)
        except Exception as exc:  # the hub client raises many kinds; the user needs the first line of any
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TaskError(f"{repo_id}: download from the hub failed ({type(exc).__name__}: {first})") from exc
    if isinstance(data, datasets.DatasetDict):
        return {name: data[name].to_list() for name in sorted(data)}
    return {split or "data": data.to_list()}


def _task_file_name(row: dict[str, Any]) -> str:
    name = str(row.get("name") or "").removesuffix(".py")
    number = row.get("problem_id")
    if number is not None and not name.startswith(f"{number}_"):
        name = f"{number}_{name}" if name else str(number)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".") or "task"


def write_kernelbench(splits: dict[str, Rows], dest: Path) -> int:
    """Write KernelBench rows (``level``, ``name``, ``problem_id``, ``code``) as ``dest/level<N>/<name>.py`` for
    levels 1-3; the folder appears whole or not at all. Return the number of task files written."""
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    written = 0
    for rows in splits.values():
        for row in rows:
            level, code = row.get("level"), row.get("code")
            if level is None or int(level) not in KERNELBENCH_LEVELS or not isinstance(code, str):
                continue
            path = partial / f"level{int(level)}" / f"{_task_file_name(row)}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code, encoding="utf-8")
            written += 1
    if not written:
        shutil.rmtree(partial, ignore_errors=True)
        raise TaskError(f"{KERNELBENCH_HUB_ID}: no level 1-3 rows with code in what the hub returned")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return written


def write_parquet(splits: dict[str, Rows], dest: Path) -> int:
    """Write every split's rows into one parquet file at ``dest`` (atomically); return the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [row for split_rows in splits.values() for row in split_rows]
    if not rows:
        raise TaskError(f"{dest.name}: the hub returned no rows")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    pq.write_table(pa.Table.from_pylist(rows), partial)
    partial.replace(dest)
    return len(rows)


@dataclass(frozen=True)
class Fetched:
    """Where a fetched task set lies, and whether this call downloaded it (False: the cache already held it)."""

    path: Path
    downloaded: bool


def fetch_kernelbench(*, force: bool = False) -> Fetched:
    """The cached KernelBench folder, downloaded first if it is not there yet (or ``force``)."""
    dest = kernelbench_cache()
    if force or not (dest / "level1").is_dir():
        write_kernelbench(download_splits(KERNELBENCH_HUB_ID), dest)
        return Fetched(dest, True)
    return Fetched(dest, False)


def fetch_ops6k(*, force: bool = False) -> Fetched:
    """The cached CUDA-Agent-Ops-6K parquet file, downloaded first if it is not there yet (or ``force``)."""
    dest = ops6k_cache()
    if force or not dest.is_file():
        write_parquet(download_splits(OPS6K_HUB_ID, split="train"), dest)
        return Fetched(dest, True)
    return Fetched(dest, False)


FETCHERS = {"kernelbench": fetch_kernelbench, "ops6k": fetch_ops6k}
