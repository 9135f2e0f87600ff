"""Stage configs: one YAML file per stage (``configs/rl/<stage>.yaml``), every value overridable with
``key.sub=value`` on the command line. Defaults follow the paper: global batch 1024, actor lr 3e-6, critic lr
6e-6, asymmetric clipping 0.2 / 0.28, token-mean loss, GAE gamma 1 and lambda 0.95, 32,768-token context for the
single-turn warm-up, 131,072 tokens and up to 150 turns for agentic PPO.

Each stage has a typed schema (`WarmupConfig`, `CollectConfig`, `RftConfig`, `CriticConfig`, `PpoConfig`; one
dataclass per section, ``rollout``, ``cluster``, ...) that holds every default once. A file is checked against its
stage's schema when it is loaded (`cuda_agent.rl.typed`): an unknown key, a missing required one or a value of the
wrong type is refused there, naming the file and the dotted key, before a model loads.
"""
from __future__ import annotations

import copy
import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from cuda_agent.errors import ConfigError
from cuda_agent.rl.typed import NOT_A_KEY, closest, from_mapping, yaml_keys

STAGES: tuple[str, ...] = ("warmup", "collect", "rft", "critic", "ppo")


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


@dataclass(frozen=True, kw_only=True)
class RolloutSection:
    """``rollout``: how the policy samples (verl's rollout workers; ``temperature`` and ``n`` on the trl path too)."""

    engine: str = "vllm"
    """verl's rollout engine (``vllm`` or ``sglang``)."""
    n: int = 1
    """Samples per prompt (a GRPO group on the trl path's GRPO)."""
    temperature: float = 1.0
    """Sampling temperature (verl's rollout, and ``generate`` on the trl path)."""
    tensor_parallel: int = 1
    """GPUs per rollout engine."""
    gpu_memory_utilization: float = 0.6
    """The share of a GPU's memory the rollout engine may take."""
    agent_workers: int = 8
    """verl's agent-loop worker processes (each holds one shared pool client)."""


@dataclass(frozen=True, kw_only=True)
class ClusterSection:
    """``cluster``: the training machines."""

    train_nodes: int = 1
    gpus_per_node: int = 8
    master_addr: str | None = None
    """torchrun's rendezvous host for a multi-node RFT (required there)."""
    master_port: int = 29500


@dataclass(frozen=True, kw_only=True)
class FilterSection:
    """``filter``: which trajectories RFT keeps (`cuda_agent.rl.filters.FilterConfig`)."""

    max_repeats: int = 3
    """Drop a trajectory that repeats one tool call more often than this."""


@dataclass(frozen=True, kw_only=True)
class EvalSection:
    """``eval``: where kernels are built and evaluated."""

    backend: dict[str, Any] = field(default_factory=dict)
    """A backend spec (`cuda_agent.rl.envfactory`): ``{kind: ray|http|local|stand_in, ...}``; empty: local."""


@dataclass(frozen=True, kw_only=True)
class PolicySection:
    """``policy``: the OpenAI-compatible endpoint that serves the checkpoint (collect with engine verl)."""

    base_url: str | None = None
    model: str | None = None
    temperature: float = 1.0


@dataclass(frozen=True, kw_only=True)
class SmallSection:
    """``small``: the trl engine's PPO (`cuda_agent.rl.ppo_small`); ignored by verl."""

    ppo_epochs: int = 1
    whiten_advantages: bool = True


@dataclass(frozen=True, kw_only=True)
class WarmupSmallSection(SmallSection):
    warmup_algorithm: Literal["ppo", "grpo"] = "ppo"
    """``ppo``: single-turn PPO with a critic (`cuda_agent.rl.warmup_ppo`); ``grpo``: TRL's GRPOTrainer."""


@dataclass(frozen=True, kw_only=True)
class PpoSmallSection(SmallSection):
    ppo_algorithm: Literal["ppo", "grpo"] = "ppo"
    """``ppo``: agentic PPO with the critic (`cuda_agent.rl.ppo_small`); ``grpo``: TRL's GRPOTrainer, no critic."""


@dataclass(frozen=True, kw_only=True)
class StageConfig:
    """What every stage file holds. A loaded file is one of the five subclasses (`STAGE_CONFIGS`)."""

    stage: str
    engine: Literal["verl", "trl"] = "verl"
    """``verl`` (real runs) or ``trl`` (the small-scale path on one GPU or a CPU, in this process)."""
    actor_path: str
    """The policy: a Hugging Face id or a local folder (the previous stage's output)."""
    output_dir: str | None = None
    """Default ``runs/rl/<stage>``."""
    seed: int = 0
    use_cpu: bool = False
    """trl engine only: train on the CPU."""
    source: str = field(default="", metadata=NOT_A_KEY)
    """The file it was read from (for error messages)."""

    def need(self, name: str) -> Any:
        """Field ``name``, which this use of the stage cannot do without. Raises `ConfigError` when it is null."""
        value = getattr(self, name)
        if value is None:
            raise ConfigError(f"{self.source or self.stage}: {name} is required here; set it in the file or as "
                              f"{name}=... on the command line")
        return value


@dataclass(frozen=True, kw_only=True)
class TrainingStage(StageConfig):
    """A stage that trains (all but collect)."""

    global_batch: int = PAPER.global_batch
    actor_lr: float = PAPER.actor_lr
    total_steps: int | None = None
    """Required except by RFT on verl (null: verl's epochs decide)."""
    epochs: int = 1000
    save_every: int = 20
    """verl's ``save_freq`` (-1: only at the end)."""
    loggers: tuple[str, ...] = ("console",)
    sequence_parallel: int = 1
    """Ulysses sequence parallelism: a sample is split over this many GPUs; must divide ``cluster.gpus_per_node``."""
    cluster: ClusterSection = field(default_factory=ClusterSection)
    verl: dict[str, Any] = field(default_factory=dict)
    """Raw verl keys, merged last into the generated config."""


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    """What a multi-turn episode is allowed (collect, critic, ppo)."""

    max_turns: int = PAPER.max_turns
    max_tokens_per_turn: int = 8192
    max_observation_tokens: int | None = None
    env: dict[str, Any] = field(default_factory=dict)
    """`EnvConfig` fields for each episode's `AgentEnv`."""


@dataclass(frozen=True, kw_only=True)
class LoopSettings(AgentSettings):
    """The ``cuda_agent`` section of a generated verl config: what `CudaAgentLoop` reads in verl's workers."""

    max_turns: int | None = None  # type: ignore[assignment]
    """null: verl's ``rollout.multi_turn.max_assistant_turns``."""
    backend: dict[str, Any] = field(default_factory=dict)
    """Where episodes are evaluated (`cuda_agent.rl.envfactory`)."""
    use_tokenizer_template: bool = False
    """Format turns with the tokenizer's own chat template rather than ours (`cuda_agent.rl.chat.ChatFormat`)."""


@dataclass(frozen=True, kw_only=True)
class RolloutStage(TrainingStage):
    """A stage whose policy samples on tasks and is scored (warm-up, critic, ppo)."""

    tasks: str
    """Training tasks: any spec `load_tasks` takes."""
    max_tasks: int | None = None
    critic_path: str | None = None
    """null: the critic starts from the actor."""
    mini_batch: int | None = None
    """PPO minibatch; null: the whole global batch."""
    critic_lr: float = PAPER.critic_lr
    clip_ratio_low: float = PAPER.clip_ratio_low
    clip_ratio_high: float = PAPER.clip_ratio_high
    loss_agg_mode: str = PAPER.loss_agg_mode
    gamma: float = PAPER.gamma
    lam: float = PAPER.lam
    max_prompt_tokens: int | None = None
    """Required by verl; the trl path cuts longer prompts to their last tokens when set."""
    max_response_tokens: int
    critic_warmup: int = 0
    """verl steps during which only the critic learns (the critic stage sets its own: all of them)."""
    rollout: RolloutSection = field(default_factory=RolloutSection)
    eval: EvalSection = field(default_factory=EvalSection)

    @property
    def minibatch(self) -> int:
        return self.global_batch if self.mini_batch is None else self.mini_batch


@dataclass(frozen=True, kw_only=True)
class WarmupConfig(RolloutStage):
    """Stage 1: single-turn PPO; one response is a whole single-file solution."""

    small: WarmupSmallSection = field(default_factory=WarmupSmallSection)


@dataclass(frozen=True, kw_only=True)
class CollectConfig(StageConfig, AgentSettings):
    """Stage 2: the warmed-up policy runs the multi-turn agent on training tasks; trajectories saved as JSONL."""

    tasks: str
    max_tasks: int | None = None
    episodes_per_task: int = 1
    concurrency: int = 64
    """Episodes at once against the endpoint (engine verl)."""
    max_prompt_tokens: int | None = None
    max_response_tokens: int
    scripted_episodes: str | None = None
    """trl engine: a JSON list of scripted episodes replayed through the same token loop."""
    policy: PolicySection = field(default_factory=PolicySection)
    rollout: RolloutSection = field(default_factory=RolloutSection)
    eval: EvalSection = field(default_factory=EvalSection)


@dataclass(frozen=True, kw_only=True)
class RftConfig(TrainingStage):
    """Stage 3: rejection fine-tuning on the filtered trajectories."""

    trajectories: str
    """The folder of collected ``*.jsonl`` trajectories."""
    max_length: int
    epochs: int = 1
    save_every: int = -1
    filter: FilterSection = field(default_factory=FilterSection)


@dataclass(frozen=True, kw_only=True)
class CriticConfig(RolloutStage, AgentSettings):
    """Stage 4: critic pre-training (verl: on fresh rollouts of the RFT actor; trl: on the saved trajectories)."""

    trajectories: str | None = None
    """trl engine: the folder of collected trajectories it trains on."""
    only_kept: bool = True
    """trl engine: train only on trajectories the RFT filter keeps."""
    max_length: int | None = None
    """trl engine: tokens per trajectory."""
    filter: FilterSection = field(default_factory=FilterSection)


@dataclass(frozen=True, kw_only=True)
class PpoConfig(RolloutStage, AgentSettings):
    """Stage 5: agentic multi-turn PPO from the RFT actor and the pre-trained critic."""

    small: PpoSmallSection = field(default_factory=PpoSmallSection)


STAGE_CONFIGS: dict[str, type[StageConfig]] = {"warmup": WarmupConfig, "collect": CollectConfig, "rft": RftConfig,
                                               "critic": CriticConfig, "ppo": PpoConfig}


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


def apply_overrides(tree: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of ``tree`` with each ``key.sub=value`` override set, in order (a section is made where missing).
    Whether a key exists is the schema's to say (`check_override`), not the file's: a key the file leaves at its
    default can be set too."""
    out = copy.deepcopy(dict(tree))
    for text in overrides:
        key, value = parse_override(text)
        node = out
        for part in key.split(".")[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[key.split(".")[-1]] = value
    return out


def check_override(cls: type, key: str, source: str) -> None:
    """Refuse an override whose dotted ``key`` names no field of stage config ``cls`` (a typo would otherwise be
    refused only as a key of the file, or not at all under a free-form section). Below a free-form mapping
    (``verl.*``, ``env.*``, ``eval.backend.*``) any key goes. Raises `ConfigError` with the closest known key."""
    parts = key.split(".")
    for i, part in enumerate(parts):
        known = yaml_keys(cls)
        if part not in known:
            section = ".".join(parts[:i]) + "." if i else ""
            raise ConfigError(f"override {key}: unknown key {section + part!r}{closest(part, known, section)} for "
                              f"{source or 'this stage'}; raw verl keys go under verl.*")
        hint = typing.get_type_hints(cls)[part]
        if not dataclasses.is_dataclass(hint):
            return
        cls = hint


def load_stage_config(path: str | Path, overrides: Sequence[str] = (), stage: str | None = None) -> StageConfig:
    """Read a stage YAML file, apply ``overrides`` and check the result against the stage's schema
    (`STAGE_CONFIGS`). Raises `ConfigError` for a missing file, bad YAML, a stage other than ``stage``, an unknown
    key (naming the closest known one), a missing required key or a value of the wrong type."""
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
    tree = apply_overrides(tree, overrides)
    found = tree.get("stage")
    if found not in STAGES:
        raise ConfigError(f"{path}: stage must be one of {', '.join(STAGES)}, got {found!r}")
    if stage is not None and found != stage:
        raise ConfigError(f"{path} is the {found!r} stage's config, not {stage!r}; use configs/rl/{stage}.yaml")
    cls = STAGE_CONFIGS[found]
    for text in overrides:
        check_override(cls, parse_override(text)[0], str(path))
    where = f"{path} (with the overrides {' '.join(overrides)})" if overrides else str(path)
    return from_mapping(cls, tree, where=where, source=str(path))


def _looks_numeric(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return any(c.isdigit() for c in value)
