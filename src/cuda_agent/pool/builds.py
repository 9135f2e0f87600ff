"""`BuildPool`: bounded concurrent builds sharing one compile cache.

Builds are nvcc subprocesses, so threads suffice; the bound keeps a burst of agents from starting hundreds of
compilers on one machine, and the shared cache means a kernel file compiled by one episode is reused by the next.
"""
from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from cuda_agent.errors import PoolError
from cuda_agent.pool.job import workspace_root

log = logging.getLogger(__name__)


class BuildPool:
    """Run `cuda_agent.build.build_workspace` on at most ``max_workers`` workspaces at once.

    Attributes:
        max_workers: concurrent builds (default: CPU count // 2, at least 1).
        cache_dir: the shared object cache (default: the build package's default cache).
        arch: compute capability to build for (None: detect).
        jobs: compiler processes per build (default: CPU count // max_workers, at least 1).
        builder: the build function (default `build_workspace`), for a pool that builds elsewhere.
    """

    def __init__(self, max_workers: int | None = None, *, cache_dir: str | Path | None = None,
                 arch: str | None = None, jobs: int | None = None,
                 builder: Callable[..., Any] | None = None) -> None:
        cpus = os.cpu_count() or 1
        self.max_workers = max(1, max_workers or cpus // 2)
        self.jobs = max(1, jobs or cpus // self.max_workers)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.arch = arch
        self._builder = builder
        self._executor = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="cuda-agent-build")
        self._closed = False

    def _build(self, root: Path) -> Any:
        builder = self._builder
        if builder is None:
            from cuda_agent.build.confined import build_confined

            builder = build_confined
        return builder(root, arch=self.arch, cache_dir=self.cache_dir, jobs=self.jobs)

    def submit(self, workspace: str | Path | Any) -> "Future[Any]":
        """Queue a build of a workspace (a folder or a `Workspace`); the future gives its `BuildResult`.
        Raises `PoolError` after `close()`."""
        if self._closed:
            raise PoolError("the build pool is closed; create a new pool")
        root = workspace_root(workspace)
        return self._executor.submit(self._build, root)

    def close(self, wait: bool = True) -> None:
        self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=not wait)
