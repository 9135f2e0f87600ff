"""Where the data the commands read lies: named by environment variables, else in documented default places.

Why not found by walking up from this file: an installed package has no checkout around it, and a guess that
happens to work in one checkout hides a missing setting until the command runs somewhere else. So each location
is either configured or a fixed documented default, and a wrong setting is an error that names the variable.

- KernelBench (folders ``level1/`` ... ``level3/``): ``$CUDA_AGENT_KERNELBENCH``, else the copy that
  ``cuda-agent data fetch kernelbench`` puts in the cache (``$CUDA_AGENT_CACHE/data``).
- The RL stage configs (``<stage>.yaml``): ``$CUDA_AGENT_RL_CONFIGS``, else ``configs/rl`` in the current directory
  (the checkout's root, where the README's commands run).
"""
from __future__ import annotations

import os
from pathlib import Path

from cuda_agent.errors import ConfigError

KERNELBENCH_ENV = "CUDA_AGENT_KERNELBENCH"
RL_CONFIGS_ENV = "CUDA_AGENT_RL_CONFIGS"


def kernelbench_root() -> Path | None:
    """The KernelBench task folder, or None where it is neither configured nor fetched.

    Raises `ConfigError` when ``$CUDA_AGENT_KERNELBENCH`` is set but holds no ``level1/``: a setting that points
    nowhere is a mistake to report, not a reason to fall back silently."""
    from cuda_agent.tasks.hub import kernelbench_cache

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
