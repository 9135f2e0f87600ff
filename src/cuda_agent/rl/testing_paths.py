"""Where the stage configs live: ``configs/rl/<stage>.yaml`` of the checkout, or ``$CUDA_AGENT_RL_CONFIGS``."""
from __future__ import annotations

import os
from pathlib import Path

from cuda_agent.errors import ConfigError


def configs_dir() -> Path:
    """The folder of stage configs; raises `ConfigError` if none is found."""
    env = os.environ.get("CUDA_AGENT_RL_CONFIGS")
    candidates = [Path(env)] if env else []
    candidates += [parent / "configs" / "rl" for parent in Path(__file__).resolve().parents]
    candidates.append(Path.cwd() / "configs" / "rl")
    for path in candidates:
        if (path / "ppo.yaml").is_file():
            return path
    raise ConfigError("no configs/rl folder found; set CUDA_AGENT_RL_CONFIGS or pass --config")


def config_path(stage: str) -> Path:
    return configs_dir() / f"{stage}.yaml"
