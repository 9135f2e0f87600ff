"""Build the environment and its evaluation backend from plain settings (a YAML section or verl's config).

Settings (all optional):
``env``: `EnvConfig` fields (``max_turns``, ``verify``, ``sandbox``, ``workspace_root``, ...);
``backend``: ``{"kind": "local"}`` (build and evaluate on this machine), ``{"kind": "ray", ...RayPool arguments}``
(the GPU pool on the evaluation nodes: evaluation runs on other GPUs than training), or ``{"kind": "stand_in",
"seed": 0}`` (the stand-in scorer of the tiny run: real builds skipped, a documented made-up reward; never for
real training). Pools are made once per process and shared by its episodes.
"""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any, Mapping

from cuda_agent.errors import ConfigError

_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def env_config(settings: Mapping[str, Any] | None):
    """An `EnvConfig` for training (150 turns) with ``settings`` applied; raises `ConfigError` on unknown keys."""
    from cuda_agent.agent import EnvConfig

    settings = dict(settings or {})
    names = {f.name for f in dataclasses.fields(EnvConfig)}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise ConfigError(f"env settings: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    if settings.get("workspace_root"):
        settings["workspace_root"] = Path(settings["workspace_root"])
    return EnvConfig.for_training(**settings)


def make_backend(spec: Mapping[str, Any] | None):
    """The `EvalBackend` named by ``spec`` (see the module docstring); raises `ConfigError` for an unknown kind."""
    spec = dict(spec or {"kind": "local"})
    kind = spec.pop("kind", "local")
    if kind == "local":
        from cuda_agent.agent import LocalBackend

        return LocalBackend(**spec)
    if kind == "ray":
        from cuda_agent.agent import PoolBackend

        timeout = spec.pop("timeout_s", None)
        key = repr(sorted(spec.items()))
        with _pools_lock:
            if key not in _pools:
                from cuda_agent.pool import RayPool  # optional: needs ray and the pool package

                _pools[key] = RayPool(**spec)
        return PoolBackend(_pools[key], timeout_s=timeout)
    if kind == "stand_in":
        from cuda_agent.rl.standin import StandInBackend

        return StandInBackend(**spec)
    raise ConfigError(f"backend kind {kind!r} is not one of local, ray, stand_in")


def make_env(settings: Mapping[str, Any] | None):
    """A fresh `AgentEnv` from ``{"env": {...}, "backend": {...}}``."""
    from cuda_agent.agent import AgentEnv

    settings = settings or {}
    return AgentEnv(env_config(settings.get("env")), make_backend(settings.get("backend")))
