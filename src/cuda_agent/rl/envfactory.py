"""Build the environment and its evaluation backend from plain settings (a YAML section or verl's config).

Settings (all optional):
``env``: `EnvConfig` fields (``max_turns``, ``verify``, ``sandbox``, ``workspace_root``, ...);
``backend``: ``{"kind": "local"}`` (build and evaluate on this machine), ``{"kind": "http", "url": ...,
"token": ...}`` (a `cuda-agent serve` on the evaluation nodes, through `PoolClient`: what verl's rollout workers
use, since they already sit in the training cluster's Ray and cannot join a second one), ``{"kind": "ray",
...RayPool arguments}`` (a GPU pool in the Ray cluster this process is in, or starts: for a driver outside verl),
or ``{"kind": "stand_in", "seed": 0}`` (the stand-in scorer of the tiny run: real builds skipped, a documented
made-up reward; never for real training). ``timeout_s`` (any pool kind) bounds each wait for a result.

Pools are made once per process (`shared_pool`) and shared by all its episodes and by the warm-up reward, so
each verl worker process holds one pool, not one per trajectory.
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
    if kind in POOL_KINDS:
        from cuda_agent.agent import PoolBackend

        timeout = spec.pop("timeout_s", None)
        return PoolBackend(shared_pool(kind, spec), timeout_s=timeout)
    if kind == "stand_in":
        from cuda_agent.rl.standin import StandInBackend

        return StandInBackend(**spec)
    raise ConfigError(f"backend kind {kind!r} is not one of local, http, ray, stand_in")


POOL_KINDS = ("http", "ray")


def shared_pool(kind: str, spec: Mapping[str, Any]) -> Any:
    """This process's pool for ``kind`` (``http``: `PoolClient` arguments, ``url`` required; ``ray``: `RayPool`
    arguments), made on first use. Raises `ConfigError` for an unknown kind or a missing ``url``."""
    spec = {k: v for k, v in spec.items() if k != "timeout_s"}
    key = kind + repr(sorted(spec.items(), key=lambda item: item[0]))
    with _pools_lock:
        if key not in _pools:
            _pools[key] = _new_pool(kind, spec)
        return _pools[key]


def _new_pool(kind: str, spec: dict[str, Any]) -> Any:
    if kind == "http":
        if not spec.get("url"):
            raise ConfigError("backend kind http needs url: the address of `cuda-agent serve` (http://host:port)")
        from cuda_agent.pool import PoolClient

        return PoolClient(**spec)
    if kind == "ray":
        from cuda_agent.pool import RayPool  # optional: needs ray and the pool package

        return RayPool(**spec)
    raise ConfigError(f"backend kind {kind!r} has no pool; pool kinds: {', '.join(POOL_KINDS)}")


def make_env(settings: Mapping[str, Any] | None):
    """A fresh `AgentEnv` from ``{"env": {...}, "backend": {...}}``."""
    from cuda_agent.agent import AgentEnv

    settings = settings or {}
    return AgentEnv(env_config(settings.get("env")), make_backend(settings.get("backend")))
