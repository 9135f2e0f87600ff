"""The small path's critic-based PPO: the clipped token-level loss by hand, the observation mask, one real update."""
from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.rl.ppo_small import Batch, PPOSettings, clipped_policy_loss, ppo_update


def _hand_token(ratio: float, adv: float, low: float, high: float) -> tuple[float, bool]:
    unclipped = -adv * ratio
    clipped = -adv * min(max(ratio, 1 - low), 1 + high)
    return max(unclipped, clipped), clipped > unclipped


def test_clipped_loss_matches_hand_computation_with_asymmetric_clipping() -> None:
    # ratios chosen to hit each case: above 1 + 0.28 with A > 0 (clipped high), below 1 - 0.2 with A < 0 (clipped
    # low), inside the band, between 1.2 and 1.28 with A > 0 (clipped only under a symmetric 0.2 rule), and ratios
    # outside the band on the side where the unclipped term wins.
    ratios = [1.5, 0.6, 1.1, 1.25, 0.5, 1.6]
    advs = [2.0, -1.0, 0.7, 1.0, 3.0, -0.5]
    mask = [1, 1, 1, 1, 1, 1]
    old = torch.zeros(1, 6)
    logp = torch.log(torch.tensor([ratios]))
    loss, frac = clipped_policy_loss(logp, old, torch.tensor([advs]), torch.tensor([mask]), 0.2, 0.28)
    per = [_hand_token(r, a, 0.2, 0.28) for r, a in zip(ratios, advs)]
    assert loss.item() == pytest.approx(sum(p[0] for p in per) / 6, rel=1e-6)
    assert frac.item() == pytest.approx(sum(p[1] for p in per) / 6)
    # the specific values: token 0 is clipped at 1.28, token 1 at 0.8, token 3 (1.25) is inside the high side
    assert per[0] == (pytest.approx(-2.0 * 1.28), True)
    assert per[1] == (pytest.approx(1.0 * 0.8), True)
    assert per[3] == (pytest.approx(-1.25), False)
    assert per[4] == (pytest.approx(-3.0 * 0.5), False)
    symmetric, _ = clipped_policy_loss(logp, old, torch.tensor([advs]), torch.tensor([mask]), 0.2, 0.2)
    assert symmetric.item() != pytest.approx(loss.item())


def test_token_mean_over_mask_only() -> None:
    logp = torch.log(torch.tensor([[1.5, 1.1], [0.9, 2.0]]))
    adv = torch.tensor([[1.0, 1.0], [1.0, 5.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss, _ = clipped_policy_loss(logp, torch.zeros(2, 2), adv, mask)
    assert loss.item() == pytest.approx((-1.28 - 1.1 - 0.9) / 3)


def test_observation_tokens_get_zero_gradient() -> None:
    # every ratio is inside the clip band, so every token would have a gradient if it were a model token
    values = [[-0.3, -1.2, -0.3, -1.4, -0.7]]
    old = torch.tensor([[-0.5, -1.0, -0.4, -1.5, -0.6]])
    adv = torch.tensor([[1.0, -2.0, 0.5, 4.0, -1.0]])
    grads = []
    for mask in ([[1, 0, 1, 0, 1]], [[1, 1, 1, 1, 1]]):
        logp = torch.tensor(values, requires_grad=True)
        loss, _ = clipped_policy_loss(logp, old, adv, torch.tensor(mask))
        loss.backward()
        assert logp.grad is not None
        grads.append(logp.grad[0])
    masked, unmasked = grads
    assert masked[1].item() == 0.0 and masked[3].item() == 0.0
    assert all(masked[i].item() != 0.0 for i in (0, 2, 4))
    assert unmasked[1].item() != 0.0 and unmasked[3].item() != 0.0


def _tiny_pair(vocab: int = 48) -> tuple[torch.nn.Module, torch.nn.Module]:
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForTokenClassification

    config = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64, num_labels=1)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config), Qwen2ForTokenClassification(config)


def test_one_update_changes_actor_and_critic_with_finite_losses() -> None:
    actor, critic = _tiny_pair()
    ids = torch.randint(1, 48, (3, 12))
    attn = torch.ones_like(ids)
    attn[2, 10:] = 0
    # prompt (mask 0), model turn (1), observation (0), model turn (1); padding masked
    mask = torch.tensor([[0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1]] * 3)
    mask[2, 10:] = 0
    batch = Batch(ids, attn, mask, torch.tensor([1.0, -1.0, 0.5]))
    before_a = [p.detach().clone() for p in actor.parameters()]
    before_c = [p.detach().clone() for p in critic.parameters()]
    stats = ppo_update(actor, critic, torch.optim.AdamW(actor.parameters(), lr=1e-3),
                       torch.optim.AdamW(critic.parameters(), lr=1e-3), batch,
                       PPOSettings(epochs=2, mini_batch=2))
    assert stats.updates == 4
    for value in (stats.policy_loss, stats.value_loss, stats.clip_fraction, stats.approx_kl):
        assert math.isfinite(value)
    assert stats.value_loss > 0
    assert any(not torch.equal(a, b) for a, b in zip(before_a, actor.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(before_c, critic.parameters()))
