"""The one-GPU run's torch parts on CUDA with a tiny random Qwen2 (a minute, before the real run spends its budget):
the LoRA actor and critic on the GPU, batched sampling, the agentic generator, and a PPO update whose batch is built
on the CPU and moved to the actor's device."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rl_samples import RELU

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_model import build_model, build_tokenizer, save_pair

    tokenizer = build_tokenizer([RELU] * 8, vocab_size=300)
    return save_pair(build_model(tokenizer, hidden=32, layers=1, heads=2), tokenizer,
                     tmp_path_factory.mktemp("tiny") / "model")


def test_lora_trainee_samples_and_updates_on_cuda(tiny_model: Path) -> None:
    import torch

    from cuda_agent.rl.generation import HFGenerator
    from cuda_agent.rl.onegpu import load_trainee_lora, sample_responses
    from cuda_agent.rl.ppo_small import PPOSettings
    from cuda_agent.rl.warmup_ppo import SingleTurnEpisode

    trainee = load_trainee_lora(tiny_model, PPOSettings(), device="cuda", actor_lr=1e-2, critic_lr=1e-2)
    assert next(trainee.actor.parameters()).device.type == "cuda"
    assert next(trainee.critic.parameters()).device.type == "cuda"
    prompt = trainee.tokenizer.encode("class Model")
    replies = sample_responses(trainee.actor, trainee.tokenizer, [prompt, prompt[:3]], 12, 1.0)
    assert len(replies) == 2 and all(0 < len(r) <= 12 for r in replies)
    out = asyncio.run(HFGenerator(trainee.actor, trainee.tokenizer)(prompt, {"max_tokens": 6}))
    assert 0 < len(out.token_ids) <= 6 and len(out.log_probs) == len(out.token_ids)
    before = {n: p.detach().clone() for n, p in trainee.actor.named_parameters() if p.requires_grad}
    episodes = [SingleTurnEpisode(prompt, r, [1] * len(r), reward, "") for r, reward in zip(replies, (1.0, -1.0))]
    stats = trainee.update(episodes)
    assert stats.updates >= 1 and torch.isfinite(torch.tensor(stats.policy_loss))
    after = dict(trainee.actor.named_parameters())
    assert any(not torch.equal(before[n], after[n]) for n in before)
