"""Agentic multi-turn PPO with a critic on the small-scale path (engine ``trl``, ``small.ppo_algorithm: ppo``).

Each step rolls out ``global_batch`` episodes with the actor (`run_token_episode` over a fresh `AgentEnv`, exactly
as the GRPO path and the collect stage play them; tasks round-robin, each repeated ``rollout.n`` times), then:

1. old log-probabilities of every token from the actor (no gradient; logits divided by the sampling temperature)
   and values from the critic (the critic stage's output: a one-label token-classification model);
2. advantages and returns with `cuda_agent.rl.critic.gae_targets` (outcome reward at the final model token,
   gamma 1, lambda 0.95, observation tokens skipped), advantages whitened over model tokens;
3. ``small.ppo_epochs`` epochs of minibatch updates: the token-level clipped policy loss with asymmetric clipping
   (``clip_ratio_low`` / ``clip_ratio_high``) and the critic's squared error, both aggregated token-mean over the
   ``response_mask`` (observation and prompt tokens carry no loss), AdamW at ``actor_lr`` / ``critic_lr``.

Why a hand-written loop here: the issue asks the RFT and critic stages to reuse the engines' trainers, and they
do; TRL 1.x has no critic-based PPO trainer that accepts an environment rollout, so this one loop is ours, in pure
torch over transformers models. The verl path runs verl's own PPO (``main_ppo`` + `CudaAgentLoop`) instead.
Differences from verl's PPO kept on purpose for a small CPU/GPU run: no dual-clip on negative advantages, no
value clipping, no KL term (the paper's recipe uses none).

Value convention (shared with the critic stage): the value of token ``t`` is read from the critic's output at
position ``t - 1`` (the state before the token was generated), as verl does.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cuda_agent.rl.config import PpoConfig, WarmupConfig
from cuda_agent.rl.critic import gae_targets, outcome_rewards, value_loss
from cuda_agent.rl.stage_io import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PPOSettings:
    """Hyper-parameters of one PPO update (see the module docstring); defaults are the paper's."""

    clip_low: float = 0.2
    clip_high: float = 0.28
    gamma: float = 1.0
    lam: float = 0.95
    epochs: int = 1
    mini_batch: int = 256
    temperature: float = 1.0
    max_grad_norm: float = 1.0
    whiten: bool = True


@dataclass(frozen=True)
class UpdateStats:
    """Means over the minibatch updates of one PPO step."""

    policy_loss: float
    value_loss: float
    clip_fraction: float
    approx_kl: float
    updates: int


@dataclass(frozen=True)
class Batch:
    """Episodes as padded tensors: full sequences (prompt + response), ``mask`` 1 on model tokens only."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor
    rewards: torch.Tensor

    def to(self, device: Any) -> "Batch":
        """The same batch on ``device`` (the actor's: a GPU run samples on the GPU, `make_batch` builds on the CPU)."""
        return Batch(self.input_ids.to(device), self.attention_mask.to(device), self.mask.to(device),
                     self.rewards.to(device))


def clipped_policy_loss(log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                        mask: torch.Tensor, clip_low: float = 0.2,
                        clip_high: float = 0.28) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level clipped surrogate, token-mean over ``mask``: ``(loss, clip_fraction)``.

    Per token: ``max(-A * r, -A * clip(r, 1 - clip_low, 1 + clip_high))`` with ``r = exp(logp - old_logp)``;
    ``clip_fraction`` is the share of masked tokens where the clipped term is the larger one."""
    m = mask.to(log_probs.dtype)
    ratio = torch.exp(log_probs - old_log_probs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    denom = m.sum().clamp(min=1.0)
    loss = (per_token * m).sum() / denom
    fraction = ((clipped > unclipped).to(m.dtype) * m).sum() / denom
    return loss, fraction.detach()


def token_log_probs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    temperature: float = 1.0) -> torch.Tensor:
    """``(batch, length)``: log-probability of token ``t`` given the tokens before it (0 at position 0)."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float() / temperature
    picked = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)


def token_values(critic: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``(batch, length)``: the value of token ``t`` from the critic's output at ``t - 1`` (0 at position 0)."""
    out = critic(input_ids=input_ids, attention_mask=attention_mask).logits[..., 0].float()
    return torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], dim=1)


def make_batch(episodes: Sequence[Any], pad_id: int) -> Batch:
    """Right-padded tensors from `TokenEpisode`s. Raises `ValueError` for an episode without model tokens."""
    for i, ep in enumerate(episodes):
        if not any(ep.response_mask):
            raise ValueError(f"episode {i} has no model token: nothing to train on (its reward has no carrier)")
    seqs = [list(ep.prompt_ids) + list(ep.response_ids) for ep in episodes]
    masks = [[0] * len(ep.prompt_ids) + list(ep.response_mask) for ep in episodes]
    width = max(len(s) for s in seqs)
    return Batch(
        input_ids=torch.tensor([s + [pad_id] * (width - len(s)) for s in seqs]),
        attention_mask=torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs]),
        mask=torch.tensor([m + [0] * (width - len(m)) for m in masks]),
        rewards=torch.tensor([float(ep.reward) for ep in episodes]),
    )


def _whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(values.dtype)
    n = m.sum().clamp(min=1.0)
    mean = (values * m).sum() / n
    var = (((values - mean) ** 2) * m).sum() / n
    return (values - mean) * torch.rsqrt(var + 1e-8) * m


def ppo_update(actor: Any, critic: Any, actor_opt: torch.optim.Optimizer, critic_opt: torch.optim.Optimizer,
               batch: Batch, settings: PPOSettings) -> UpdateStats:
    """One PPO step on ``batch`` (moved to the actor's device): targets from the frozen snapshot, then epochs of
    minibatch updates."""
    batch = batch.to(next(actor.parameters()).device)
    with torch.no_grad():
        old_logp = token_log_probs(actor, batch.input_ids, batch.attention_mask, settings.temperature)
        values = token_values(critic, batch.input_ids, batch.attention_mask)
        rewards = outcome_rewards(batch.mask, batch.rewards)
        advantages, returns = gae_targets(rewards, values, batch.mask, settings.gamma, settings.lam)
        if settings.whiten:
            advantages = _whiten(advantages, batch.mask)
    n = batch.input_ids.shape[0]
    size = max(1, min(settings.mini_batch, n))
    sums = {"policy": 0.0, "value": 0.0, "clip": 0.0, "kl": 0.0}
    updates = 0
    for _ in range(settings.epochs):
        for start in range(0, n, size):
            idx = slice(start, start + size)
            ids, attn, mask = batch.input_ids[idx], batch.attention_mask[idx], batch.mask[idx]
            logp = token_log_probs(actor, ids, attn, settings.temperature)
            p_loss, clip = clipped_policy_loss(logp, old_logp[idx], advantages[idx], mask,
                                               settings.clip_low, settings.clip_high)
            actor_opt.zero_grad()
            p_loss.backward()
            torch.nn.utils.clip_grad_norm_(actor.parameters(), settings.max_grad_norm)
            actor_opt.step()
            v_loss = value_loss(token_values(critic, ids, attn), returns[idx], mask)
            critic_opt.zero_grad()
            v_loss.backward()
            torch.nn.utils.clip_grad_norm_(critic.parameters(), settings.max_grad_norm)
            critic_opt.step()
            m = mask.to(logp.dtype)
            kl = ((old_logp[idx] - logp.detach()) * m).sum() / m.sum().clamp(min=1.0)
            sums["policy"] += float(p_loss.detach())
            sums["value"] += float(v_loss.detach())
            sums["clip"] += float(clip)
            sums["kl"] += float(kl)
            updates += 1
    k = max(1, updates)
    return UpdateStats(sums["policy"] / k, sums["value"] / k, sums["clip"] / k, sums["kl"] / k, updates)


def settings_of(cfg: WarmupConfig | PpoConfig) -> PPOSettings:
    return PPOSettings(clip_low=cfg.clip_ratio_low, clip_high=cfg.clip_ratio_high, gamma=cfg.gamma, lam=cfg.lam,
                       epochs=cfg.small.ppo_epochs, mini_batch=cfg.minibatch, temperature=cfg.rollout.temperature,
                       whiten=cfg.small.whiten_advantages)


def value_head_from(path: str) -> Any:
    """A critic: a one-label token-classification model loaded from ``path`` (an actor's folder gives a fresh
    value head on the actor's body, as the critic stage and the warm-up build it; a critic's folder reloads it)."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(path, num_labels=1)


@dataclass
class Trainee:
    """Actor, critic, tokenizer and the two AdamW optimisers of one PPO run (shared by the warm-up and ppo)."""

    actor: Any
    critic: Any
    tokenizer: Any
    actor_opt: torch.optim.Optimizer
    critic_opt: torch.optim.Optimizer
    settings: PPOSettings

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def update(self, episodes: Sequence[Any]) -> UpdateStats:
        return ppo_update(self.actor, self.critic, self.actor_opt, self.critic_opt, make_batch(episodes, self.pad_id),
                          self.settings)


def load_trainee(cfg: WarmupConfig | PpoConfig) -> Trainee:
    """Actor from ``actor_path``; critic from ``critic_path``, or a value head initialised from the actor when it is
    null. Raises `ConfigError` when ``actor_path`` is missing."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    actor_path = cfg.actor_path
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(actor_path)
    actor = AutoModelForCausalLM.from_pretrained(actor_path)
    critic = value_head_from(cfg.critic_path or actor_path)
    actor.eval()
    critic.eval()
    return Trainee(actor, critic, tokenizer, torch.optim.AdamW(actor.parameters(), lr=cfg.actor_lr),
                   torch.optim.AdamW(critic.parameters(), lr=cfg.critic_lr), settings_of(cfg))


def step_row(step: int, stats: UpdateStats, rewards: Sequence[float]) -> dict[str, Any]:
    """One line of a stage's ``<stage>_log.jsonl`` (the format `benchmarks/rl_tiny.py` plots)."""
    return {"step": step, "loss": stats.policy_loss + stats.value_loss, "policy_loss": stats.policy_loss,
            "value_loss": stats.value_loss, "clip_fraction": stats.clip_fraction, "approx_kl": stats.approx_kl,
            "reward": sum(rewards) / max(1, len(rewards)), "episodes": len(rewards), "updates": stats.updates}


def save_run(out: Path, stage: str, trainee: Trainee, history: Sequence[dict[str, Any]],
             episodes: int) -> tuple[dict[str, float], dict[str, str]]:
    """Save actor and critic under ``out``, the step log, and return ``(metrics, files)`` keyed by ``stage``."""
    for model, name in ((trainee.actor, "actor"), (trainee.critic, "critic")):
        model.save_pretrained(out / name)
        trainee.tokenizer.save_pretrained(out / name)
    log_path = out / f"{stage}_log.jsonl"
    log_path.write_text("".join(json.dumps(r) + "\n" for r in history))
    last = history[-1] if history else {}
    n = max(1, len(history))
    metrics = {f"{stage}_steps": float(len(history)), f"{stage}_episodes": float(episodes),
               f"{stage}_mean_reward": sum(r["reward"] for r in history) / n,
               f"{stage}_final_policy_loss": float(last.get("policy_loss", float("nan"))),
               f"{stage}_final_value_loss": float(last.get("value_loss", float("nan"))),
               f"{stage}_mean_clip_fraction": sum(r["clip_fraction"] for r in history) / n}
    return metrics, {"actor": str(out / "actor"), "critic": str(out / "critic"), "log": str(log_path)}


def run_ppo_stage(cfg: PpoConfig, out: Path, progress: Progress | None = None) -> tuple[dict[str, float], dict[str, str]]:
    """The ``ppo`` stage of the small path: actor from ``actor_path``, critic from ``critic_path``. Raises
    `ConfigError` when either path is missing from the config, `PolicyError` when generation fails."""
    from cuda_agent.rl.envfactory import make_env
    from cuda_agent.rl.generation import HFGenerator, collect_episode, rollout_limits
    from cuda_agent.rl.stage_io import load_task_list

    cfg.need("critic_path")
    trainee = load_trainee(cfg)
    tokenizer = trainee.tokenizer
    tasks = load_task_list(cfg)
    limits = rollout_limits(cfg)
    env_settings = {"env": cfg.env, "backend": cfg.eval.backend}
    generator = HFGenerator(trainee.actor, tokenizer, temperature=trainee.settings.temperature)
    per_step, repeats = cfg.global_batch, max(1, cfg.rollout.n)
    steps = int(cfg.need("total_steps"))
    traj_dir = out / "trajectories"
    traj_dir.mkdir(parents=True, exist_ok=True)
    history: list[dict[str, Any]] = []
    episodes_done = 0
    order = [t for t in tasks for _ in range(repeats)]
    for step in range(1, steps + 1):
        episodes = []
        for _ in range(per_step):
            task = order[episodes_done % len(order)]
            env = make_env(env_settings)
            try:
                episodes.append(collect_episode(env, task, generator, tokenizer, limits,
                                                traj_dir / f"episode-{episodes_done:05d}.jsonl"))
            finally:
                env.close()
            episodes_done += 1
        usable = [ep for ep in episodes if any(ep.response_mask)]
        if not usable:
            log.warning("ppo step %d: no episode has a model token; skipped", step)
            continue
        row = step_row(step, trainee.update(usable), [ep.reward for ep in episodes])
        history.append(row)
        log.info("ppo step %d: %s", step, row)
        if progress is not None:
            progress("ppo", step, steps)
    return save_run(out, "ppo", trainee, history, episodes_done)
