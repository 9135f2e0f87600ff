"""Load a workspace library and call its registered functions from Python (the ABI lives in `cuda_agent.kernel_abi`,
which the sandboxed candidate process uses too); which library a workspace's ``binding.ops`` loads.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from cuda_agent.errors import BuildError
from cuda_agent.kernel_abi import KernelCallError, LibraryLoadError, Op, OpLibrary

__all__ = ["KernelCallError", "Op", "OpLibrary", "active_library", "load_library", "load_ops", "set_active_library"]

_loaded: dict[Path, OpLibrary] = {}
_lock = threading.Lock()
_active_library: Path | None = None


def load_library(path: str | Path) -> OpLibrary:
    """Load (once per process) the library at ``path``."""
    path = Path(path).resolve()
    with _lock:
        if path not in _loaded:
            try:
                _loaded[path] = OpLibrary(path)
            except LibraryLoadError as exc:
                raise BuildError(str(exc)) from exc
        return _loaded[path]


def set_active_library(path: str | Path | None) -> None:
    """Make every workspace's ``binding.ops`` load this library instead of building (the evaluator builds first)."""
    global _active_library
    _active_library = Path(path).resolve() if path is not None else None


def active_library() -> Path | None:
    if _active_library is not None:
        return _active_library
    env = os.environ.get("CUDA_AGENT_LIBRARY")
    return Path(env).resolve() if env else None


def load_ops(binding_file: str | Path) -> OpLibrary:
    """What a workspace's ``binding.py`` calls: the active library, or the workspace built now (a no-op when
    nothing changed)."""
    active = active_library()
    if active is not None:
        return load_library(active)
    from cuda_agent.compiler.builder import build_workspace

    result = build_workspace(Path(binding_file).resolve().parent)
    result.raise_for_errors()
    assert result.library is not None
    return load_library(result.library)
