"""Build the environment and its evaluation backend from plain settings (a YAML section or verl's config).

Settings (all optional):
``env``: `EnvConfig` fields (``max_turns``, ``verify``, ``sandbox``, ``workspace_root``, ...);
``backend``: ``{"kind": "local"}`` (build and evaluate on this machine), ``{"kind": "http", "url": ...,
"token": ...}`` (a `cuda-agent serve` on the evaluation nodes, through `PoolClient`: what verl's rollout workers
use, since they already sit in the training cluster's Ray and cannot join a second one), ``{"kind": "ray",
...RayPool arguments}`` (a GPU pool in the Ray cluster this process is in, or starts: for a driver outside verl),
or ``{"kind": "stand_in", "seconds": 0, "fault": null}`` (the stand-in evaluator in this process, for machines
without a GPU: `cuda_agent.rl.standin`; never for real training). ``timeout_s`` (any pool kind) bounds each wait
for a result.

This module is the one place a spec becomes a backend: every kind but ``local`` is a pool, made once per process
(`shared_pool`) and shared by all its episodes (`make_backend`) and by the warm-up reward
(`cuda_agent.rl.reward.score_solution`), so each verl worker process holds one pool, not one per trajectory.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
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


POOL_KINDS = ("http", "ray", "stand_in")
KINDS = ("local", *POOL_KINDS)


@dataclass(frozen=True)
class BackendSpec:
    """A backend spec taken apart: its ``kind``, the wait bound ``timeout_s`` (pool kinds), and the arguments of
    the backend or pool it names (`LocalBackend`, `PoolClient`, `RayPool`, `StandInPool`)."""

    kind: str
    args: dict[str, Any]
    timeout_s: float | None = None

    @classmethod
    def parse(cls, spec: Mapping[str, Any] | None) -> "BackendSpec":
        """Raises `ConfigError` for an unknown kind (empty or None: ``local``)."""
        args = dict(spec or {})
        kind = args.pop("kind", "local")
        if kind not in KINDS:
            raise ConfigError(f"backend kind {kind!r} is not one of {', '.join(KINDS)}")
        timeout = args.pop("timeout_s", None) if kind in POOL_KINDS else None
        return cls(kind, args, timeout)

    @property
    def pool(self) -> Any:
        """This process's pool for a pool kind (`shared_pool`)."""
        return shared_pool(self.kind, self.args)


def make_backend(spec: Mapping[str, Any] | None):
    """The `EvalBackend` named by ``spec`` (see the module docstring); raises `ConfigError` for an unknown kind."""
    parsed = BackendSpec.parse(spec)
    if parsed.kind == "local":
        from cuda_agent.agent import LocalBackend

        return LocalBackend(**parsed.args)
    from cuda_agent.agent import PoolBackend

    return PoolBackend(parsed.pool, timeout_s=parsed.timeout_s)


def shared_pool(kind: str, spec: Mapping[str, Any]) -> Any:
    """This process's pool for ``kind`` (``http``: `PoolClient` arguments, ``url`` required; ``ray``: `RayPool`
    arguments; ``stand_in``: `StandInPool` arguments), made on first use. Raises `ConfigError` for an unknown kind
    or a missing ``url``."""
    spec = {k: v for k, v in spec.items() if k != "timeout_s"}
    key = kind + repr(sorted(spec.items(), key=lambda item: item[0]))
    with _pools_lock:
        if key not in _pools:
            try:
                _pools[key] = _new_pool(kind, spec)
            except TypeError as exc:  # an argument the pool does not take: the spec's mistake, said as such
                raise ConfigError(f"backend kind {kind}: {exc}") from exc
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
    if kind == "stand_in":
        from cuda_agent.rl.standin import StandInPool

        return StandInPool(**spec)
    raise ConfigError(f"backend kind {kind!r} has no pool; pool kinds: {', '.join(POOL_KINDS)}")


def make_env(settings: Mapping[str, Any] | None):
    """A fresh `AgentEnv` from ``{"env": {...}, "backend": {...}}``."""
    from cuda_agent.agent import AgentEnv

    settings = settings or {}
    return AgentEnv(env_config(settings.get("env")), make_backend(settings.get("backend")))
