"""Stage configs: one YAML file per stage (``configs/rl/<stage>.yaml``), every value overridable with
``key.sub=value`` on the command line. Defaults follow the paper: global batch 1024, actor lr 3e-6, critic lr
6e-6, asymmetric clipping 0.2 / 0.28, token-mean loss, GAE gamma 1 and lambda 0.95, 32,768-token context for the
single-turn warm-up, 131,072 tokens and up to 150 turns for agentic PPO.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cuda_agent.errors import ConfigError

STAGES: tuple[str, ...] = ("warmup", "collect", "rft", "critic", "ppo")
ENGINES: tuple[str, ...] = ("verl", "trl")
PASSTHROUGH = "verl"


@dataclass(frozen=True)
class PaperDefaults:
    """The published recipe's numbers (what the YAML files start from)."""

    global_batch: int = 1024
    actor_lr: float = 3e-6
    critic_lr: float = 6e-6
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.28
    loss_agg_mode: str = "token-mean"
    gamma: float = 1.0
    lam: float = 0.95
    warmup_context: int = 32_768
    agent_context: int = 131_072
    max_turns: int = 150


PAPER = PaperDefaults()


@dataclass(frozen=True)
class StageConfig:
    """A loaded stage config: its stage, engine, and the settings tree (after overrides)."""

    stage: str
    engine: str
    values: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.values
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    def require(self, dotted: str) -> Any:
        value = self.get(dotted)
        if value is None:
            raise ConfigError(f"{self.source or self.stage}: {dotted} is required; set it in the file or as "
                              f"{dotted}=... on the command line")
        return value


def parse_override(text: str) -> tuple[str, Any]:
    """``a.b=value`` -> (``a.b``, value parsed as YAML: numbers, booleans, lists, null). Raises `ConfigError`."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not key=value (e.g. actor_lr=1e-6)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    import yaml

    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str) and _looks_numeric(value):
        value = float(value)
    return key, value


def apply_overrides(tree: Mapping[str, Any], overrides: Sequence[str], source: str = "") -> dict[str, Any]:
    """A copy of ``tree`` with each override set. A key that is not in the file is refused (a typo would
    otherwise be silently ignored), except under ``verl.`` (raw keys handed to verl as they are)."""
    out = copy.deepcopy(dict(tree))
    for text in overrides:
        key, value = parse_override(text)
        parts = key.split(".")
        node = out
        for i, part in enumerate(parts[:-1]):
            if part not in node or not isinstance(node[part], dict):
                if parts[0] != PASSTHROUGH:
                    raise ConfigError(f"override {key}: {'.'.join(parts[:i + 1])} is not a section of {source}")
                node[part] = {}
            node = node[part]
        if parts[-1] not in node and parts[0] != PASSTHROUGH:
            known = ", ".join(sorted(node)) or "none"
            raise ConfigError(f"override {key}: unknown key {parts[-1]!r} in {source or 'the config'} (known: {known}); "
                              "raw verl keys go under verl.*")
        node[parts[-1]] = value
    return out


def load_stage_config(path: str | Path, overrides: Sequence[str] = (), stage: str | None = None) -> StageConfig:
    """Read a stage YAML file and apply ``overrides``. Raises `ConfigError` for a missing file, bad YAML, a
    stage other than ``stage``, or an unknown engine."""
    import yaml

    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the stage config: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: a stage config must be a mapping")
    tree = apply_overrides(tree, overrides, str(path))
    found = tree.get("stage")
    if found not in STAGES:
        raise ConfigError(f"{path}: stage must be one of {', '.join(STAGES)}, got {found!r}")
    if stage is not None and found != stage:
        raise ConfigError(f"{path} is the {found!r} stage's config, not {stage!r}; use configs/rl/{stage}.yaml")
    engine = tree.get("engine", "verl")
    if engine not in ENGINES:
        raise ConfigError(f"{path}: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return StageConfig(stage=found, engine=engine, values=tree, source=str(path))


def _looks_numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return any(c.isdigit() for c in value)
