"""`BuildPool`: bounded concurrent builds sharing one compile cache.

Builds are nvcc subprocesses, so threads suffice; the bound keeps a burst of agents from starting hundreds of
compilers on one machine, and the shared cache means a kernel file compiled by one episode is reused by the next.
The same workers build KernelBench single-file solutions (`submit_inline`, `submit_solution`) with
`cuda_agent.compiler.inline.build_inline`, so those builds overlap GPU evaluation too.
"""
from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cuda_agent.compiler.confined import build_confined
from cuda_agent.compiler.inline import build_inline, extract_inline_specs
from cuda_agent.errors import PoolError
from cuda_agent.pool.job import workspace_root

if TYPE_CHECKING:
    from cuda_agent.compiler.builder import BuildResult
    from cuda_agent.workspace import Workspace

log = logging.getLogger(__name__)


class BuildPool:
    """Run `cuda_agent.compiler.build_workspace` on at most ``max_workers`` workspaces at once.

    Attributes:
        max_workers: concurrent builds (default: CPU count // 2, at least 1).
        cache_dir: the shared object cache (default: the build package's default cache).
        arch: compute capability to build for (None: detect).
        jobs: compiler processes per build (default: CPU count // max_workers, at least 1).
        builder: the build function (default `build_workspace`), for a pool that builds elsewhere.
        inline_builder: the single-file build function (default `cuda_agent.compiler.inline.build_inline`).
        inline_options: more keyword arguments for it (``runner``, ``work_dir``, ``strategies``...).
    """

    def __init__(self, max_workers: int | None = None, *, cache_dir: str | Path | None = None,
                 arch: str | None = None, jobs: int | None = None,
                 builder: Callable[..., Any] | None = None, inline_builder: Callable[..., Any] | None = None,
                 inline_options: dict[str, Any] | None = None) -> None:
        cpus = os.cpu_count() or 1
        self.max_workers = max(1, max_workers or cpus // 2)
        self.jobs = max(1, jobs or cpus // self.max_workers)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.arch = arch
        self._builder = builder
        self._inline_builder = inline_builder
        self.inline_options = dict(inline_options or {})
        self._executor = ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix="cuda-agent-build")
        self._closed = False

    def _build(self, root: Path) -> "BuildResult":
        builder = self._builder
        if builder is None:
            builder = build_confined
        return builder(root, arch=self.arch, cache_dir=self.cache_dir, jobs=self.jobs)

    def submit(self, workspace: "str | Path | Workspace") -> "Future[BuildResult]":
        """Queue a build of a workspace (a folder or a `Workspace`); the future gives its `BuildResult`.
        Raises `PoolError` after `close()`."""
        if self._closed:
            raise PoolError("the build pool is closed; create a new pool")
        root = workspace_root(workspace)
        return self._executor.submit(self._build, root)

    def _build_inline(self, spec: Any) -> Any:
        builder = self._inline_builder
        if builder is None:
            builder = build_inline
        options = {"arch": self.arch, "jobs": self.jobs, **self.inline_options}
        if self.cache_dir is not None:
            options.setdefault("cache_dir", self.cache_dir / "inline")
        return builder(spec, **options)

    def submit_inline(self, spec: Any) -> "Future[Any]":
        """Queue a build of one load_inline extension (an `InlineSpec`); the future gives its
        `InlineBuildResult`. Raises `PoolError` after `close()`."""
        if self._closed:
            raise PoolError("the build pool is closed; create a new pool")
        return self._executor.submit(self._build_inline, spec)

    def submit_solution(self, source: str, *, origin: str = "<solution>") -> "list[Future[Any]]":
        """Queue builds of every load_inline call a single-file solution makes, found statically. Raises
        `cuda_agent.compiler.inline.InlineExtractionError` when a call is not static: run the recorder (in the
        sandbox) and pass its specs to `submit_inline` instead."""
        return [self.submit_inline(spec) for spec in extract_inline_specs(source, origin=origin)]

    def close(self, wait: bool = True) -> None:
        self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=not wait)
