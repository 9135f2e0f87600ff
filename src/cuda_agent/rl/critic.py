"""Critic targets: the outcome reward at the final model token, GAE over model tokens only.

With an outcome reward r placed on the last model token and values V over the response, GAE(gamma, lambda) runs
backwards over the tokens whose ``response_mask`` is 1; observation tokens (mask 0) are skipped: they neither take
a TD error nor break the chain, so the value of the last model token before a tool response bootstraps from the
first model token after it. The value target is ``returns = advantages + values`` and the critic loss is the mean
squared error over model tokens. The paper's settings are gamma = 1 and lambda = 0.95. These are verl's semantics
for multi-turn GAE, written here so that they are testable on hand-built trajectories and usable by the small-scale
critic trainer.
"""
from __future__ import annotations

from typing import Sequence

import torch

GAMMA = 1.0
LAMBDA = 0.95


def outcome_rewards(response_mask: torch.Tensor, rewards: torch.Tensor | Sequence[float]) -> torch.Tensor:
    """Token-level rewards ``(batch, length)``: each row's reward on its last token with mask 1, zero elsewhere.

    Raises `ValueError` for a row with no model token (nothing could carry the reward)."""
    mask = response_mask.to(torch.float32)
    rewards = torch.as_tensor(rewards, dtype=torch.float32, device=mask.device)
    out = torch.zeros_like(mask)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).max(dim=1).values
    if (last < 0).any():
        raise ValueError(f"rows {torch.nonzero(last < 0).flatten().tolist()} have no model token to carry the reward")
    out[torch.arange(mask.shape[0], device=mask.device), last] = rewards
    return out


def gae_targets(token_rewards: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor,
                gamma: float = GAMMA, lam: float = LAMBDA) -> tuple[torch.Tensor, torch.Tensor]:
    """``(advantages, returns)``, both ``(batch, length)`` and zero on masked tokens; not whitened (PPO whitens
    advantages itself; the critic needs the raw returns)."""
    mask = response_mask.to(values.dtype)
    next_value = torch.zeros(values.shape[0], dtype=values.dtype, device=values.device)
    last_gae = torch.zeros_like(next_value)
    advantages = torch.zeros_like(values)
    for t in reversed(range(values.shape[1])):
        m = mask[:, t]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        gae = delta + gamma * lam * last_gae
        last_gae = m * gae + (1 - m) * last_gae
        next_value = m * values[:, t] + (1 - m) * next_value
        advantages[:, t] = m * gae
    returns = (advantages + values) * mask
    return advantages, returns


def value_loss(predicted: torch.Tensor, returns: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Mean squared error over model tokens (token-mean, as verl's ``loss_agg_mode=token-mean``)."""
    mask = response_mask.to(predicted.dtype)
    return ((predicted - returns) ** 2 * mask).sum() / mask.sum().clamp(min=1.0)
