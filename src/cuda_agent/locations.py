"""Where the data the commands read lies: named by environment variables, else in documented default places.

Why not found by walking up from this file: an installed package has no checkout around it, and a guess that
happens to work in one checkout hides a missing setting until the command runs somewhere else. So each location
is either configured or a fixed documented default, and a wrong setting is an error that names the variable.

- KernelBench (folders ``level1/`` ... ``level3/``): ``$CUDA_AGENT_KERNELBENCH``, else the copy that
  ``cuda-agent data fetch kernelbench`` puts in the cache (``$CUDA_AGENT_CACHE/data``, `data_dir`).
- The fetched task sets (`cuda_agent.tasks.hub` writes them): `kernelbench_cache`, `ops6k_cache`.
- The RL stage configs (``<stage>.yaml``): ``$CUDA_AGENT_RL_CONFIGS``, else ``configs/rl`` in the current directory
  (the checkout's root, where the README's commands run).
"""
from __future__ import annotations

import os
from pathlib import Path

from cuda_agent.errors import ConfigError

KERNELBENCH_ENV = "CUDA_AGENT_KERNELBENCH"
RL_CONFIGS_ENV = "CUDA_AGENT_RL_CONFIGS"


def data_dir() -> Path:
    """Where fetched task sets live: ``$CUDA_AGENT_CACHE/data``, else ``~/.cache/cuda-agent/data``."""
    env = os.environ.get("CUDA_AGENT_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cuda-agent"
    return base / "data"


def kernelbench_cache() -> Path:
    """The fetched KernelBench folder (``level1/`` ... inside); it may not exist yet."""
    return data_dir() / "kernelbench"


def ops6k_cache() -> Path:
    """The fetched CUDA-Agent-Ops-6K parquet file; it may not exist yet."""
    return data_dir() / "ops6k" / "ops6k.parquet"


def kernelbench_root() -> Path | None:
    """The KernelBench task folder, or None where it is neither configured nor fetched.

    Raises `ConfigError` when ``$CUDA_AGENT_KERNELBENCH`` is set but holds no ``level1/``: a setting that points
    nowhere is a mistake to report, not a reason to fall back silently."""
    configured = os.environ.get(KERNELBENCH_ENV)
    if configured:
        path = Path(configured).expanduser()
        if not (path / "level1").is_dir():
            raise ConfigError(f"{KERNELBENCH_ENV}={configured}: no level1/ folder there; point it at a folder holding "
                              "level1/, level2/, level3/ (a KernelBench checkout's KernelBench/ folder)")
        return path
    cached = kernelbench_cache()
    return cached if (cached / "level1").is_dir() else None


def rl_configs_dir(stage: str = "ppo") -> Path:
    """The folder of RL stage configs; raises `ConfigError`, naming ``<stage>.yaml``, if neither the variable nor
    the default holds that stage's config."""
    configured = os.environ.get(RL_CONFIGS_ENV)
    path = Path(configured).expanduser() if configured else Path.cwd() / "configs" / "rl"
    if not (path / f"{stage}.yaml").is_file():
        where = f"{RL_CONFIGS_ENV}={configured}" if configured else f"{path} (the default, from the current directory)"
        raise ConfigError(f"no {stage}.yaml in {where}; set {RL_CONFIGS_ENV} to the checkout's configs/rl folder, "
                          f"run from the checkout's root, or pass --config FILE")
    return path


def rl_config_path(stage: str) -> Path:
    """The config file of one RL stage (``warmup``, ``ppo``, ...); raises `ConfigError` where there is none."""
    return rl_configs_dir(stage) / f"{stage}.yaml"
