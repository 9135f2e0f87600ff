"""The content-hash cache key: the same task, solution files, GPU, settings and library versions give the same
key, so the same evaluation is never run twice unless asked."""
from __future__ import annotations

import functools
import hashlib
import json
import platform
import subprocess
from importlib import metadata
from typing import Any, Mapping


def files_digest(files: Mapping[str, bytes]) -> str:
    """SHA-256 over (relative path, content) pairs in path order: independent of where the files lie."""
    digest = hashlib.sha256()
    for rel, content in sorted(files.items()):
        digest.update(rel.encode() + b"\0" + len(content).to_bytes(8, "little") + content)
    return digest.hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def cache_key(
    task_code: str,
    solution_files: Mapping[str, bytes] | str,
    gpu: str,
    settings: Mapping[str, Any] | None = None,
    versions: Mapping[str, str] | None = None,
) -> str:
    """The key of one evaluation: SHA-256 of the task code, the solution files (or their `files_digest`), the GPU
    name, the evaluation settings (kind, config, evaluator) and the library versions (`library_versions()`)."""
    solution = solution_files if isinstance(solution_files, str) else files_digest(solution_files)
    payload = {
        "task": hashlib.sha256(task_code.encode()).hexdigest(),
        "solution": solution,
        "gpu": gpu,
        "settings": dict(settings or {}),
        "versions": dict(versions if versions is not None else library_versions()),
    }
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


def _package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


@functools.lru_cache(maxsize=1)
def _nvcc_version() -> str:
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "absent"
    lines = [line for line in out.stdout.splitlines() if "release" in line]
    return lines[-1].strip() if lines else "unknown"


@functools.lru_cache(maxsize=1)
def library_versions() -> dict[str, str]:
    """Versions that change timings or results: cuda-agent, torch, Python and nvcc (read without importing torch)."""
    from cuda_agent import __version__

    return {
        "cuda_agent": __version__,
        "torch": _package_version("torch"),
        "python": platform.python_version(),
        "nvcc": _nvcc_version(),
    }
