import pytest
import torch

from cuda_agent.rl.critic import gae_targets, outcome_rewards, value_loss


def test_outcome_reward_goes_on_the_last_model_token_not_a_trailing_observation():
    mask = torch.tensor([[1, 1, 0, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0]])
    rewards = outcome_rewards(mask, [2.0, -1.0])
    assert rewards.tolist() == [[0, 0, 0, 0, 2.0, 0, 0], [-1.0, 0, 0, 0, 0, 0, 0]]


def test_row_without_model_tokens_is_refused():
    with pytest.raises(ValueError, match="rows \\[0\\]"):
        outcome_rewards(torch.tensor([[0, 0]]), [1.0])


def test_gae_gamma_1_lambda_095_hand_computed_with_observation_tokens_skipped():
    # model tokens at 0, 1 and 4; tokens 2-3 are a tool response (their values must not matter)
    mask = torch.tensor([[1, 1, 0, 0, 1]])
    values = torch.tensor([[0.5, 0.6, 9.0, -9.0, 0.8]])
    rewards = outcome_rewards(mask, [2.0])
    adv, ret = gae_targets(rewards, values, mask, gamma=1.0, lam=0.95)
    # t=4: 2 - 0.8 = 1.2 ; t=1: (0.8 - 0.6) + 0.95 * 1.2 = 1.34 ; t=0: (0.6 - 0.5) + 0.95 * 1.34 = 1.373
    assert adv[0].tolist() == pytest.approx([1.373, 1.34, 0.0, 0.0, 1.2])
    assert ret[0].tolist() == pytest.approx([1.873, 1.94, 0.0, 0.0, 2.0])


def test_lambda_1_returns_equal_the_outcome_everywhere():
    mask = torch.tensor([[1, 0, 1, 1], [1, 1, 1, 0]])
    values = torch.randn(2, 4)
    _, ret = gae_targets(outcome_rewards(mask, [3.0, -1.0]), values, mask, gamma=1.0, lam=1.0)
    assert torch.allclose(ret, torch.tensor([[3.0, 0.0, 3.0, 3.0], [-1.0, -1.0, -1.0, 0.0]]), atol=1e-5)


def test_value_loss_is_token_mean_over_model_tokens():
    mask = torch.tensor([[1, 0, 1]])
    loss = value_loss(torch.tensor([[1.0, 100.0, 3.0]]), torch.tensor([[0.0, 0.0, 1.0]]), mask)
    assert loss.item() == pytest.approx((1.0 + 4.0) / 2)
