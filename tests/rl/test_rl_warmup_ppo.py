"""The small path's single-turn PPO warm-up: one real step on a tiny random model with a scripted reward."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from rl_samples import RELU

from cuda_agent.errors import ConfigError
from cuda_agent.rl.config import load_stage_config
from cuda_agent.rl.data import SINGLE_TURN_SYSTEM, single_turn_messages
from cuda_agent.rl.ppo_small import (
    PPOSettings,
    Trainee,
    clipped_policy_loss,
    make_batch,
    token_log_probs,
    value_head_from,
    value_loss,
)
from cuda_agent.rl.small import HFGenerator
from cuda_agent.locations import rl_config_path as config_path
from cuda_agent.rl.warmup_ppo import prompt_ids, run_warmup_ppo_stage, warmup_step


def _scripted_reward(text: str, task_json: str) -> float:
    assert json.loads(task_json)["id"] == "user/relu"
    return 1.0 if len(text) % 2 else -1.0


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_model import build_model, build_tokenizer, save_pair

    tokenizer = build_tokenizer([SINGLE_TURN_SYSTEM, RELU, "class ModelNew(nn.Module): pass"], vocab_size=400)
    return save_pair(build_model(tokenizer, hidden=32, layers=1, heads=2, max_positions=1024), tokenizer,
                     tmp_path_factory.mktemp("warmup-base"))


def _trainee(base: Path) -> Trainee:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    actor = AutoModelForCausalLM.from_pretrained(base)
    critic = value_head_from(str(base))
    return Trainee(actor, critic, AutoTokenizer.from_pretrained(base), torch.optim.AdamW(actor.parameters(), lr=1e-3),
                   torch.optim.AdamW(critic.parameters(), lr=1e-3), PPOSettings(epochs=1, mini_batch=2))


def test_one_warmup_step_masks_the_prompt_and_updates_actor_and_critic(base: Path) -> None:
    from cuda_agent.tasks.task import Task

    trainee = _trainee(base)
    task = Task(id="user/relu", code=RELU, name="relu")
    ids = prompt_ids(trainee.tokenizer, single_turn_messages(task), None)
    prompts = [(ids, json.dumps(task.to_dict()))] * 3
    before_a = [p.detach().clone() for p in trainee.actor.parameters()]
    before_c = [p.detach().clone() for p in trainee.critic.parameters()]
    row, episodes = warmup_step(trainee, HFGenerator(trainee.actor, trainee.tokenizer), prompts, _scripted_reward,
                                max_tokens=12, step=1)
    assert row is not None and len(episodes) == 3
    for key in ("loss", "policy_loss", "value_loss", "clip_fraction", "reward"):
        assert math.isfinite(row[key]), key
    assert row["value_loss"] > 0
    assert row["reward"] == pytest.approx(sum(ep.reward for ep in episodes) / 3)
    assert {ep.reward for ep in episodes} <= {1.0, -1.0}
    assert any(not torch.equal(a, b) for a, b in zip(before_a, trainee.actor.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(before_c, trainee.critic.parameters()))

    # one turn: the prompt carries mask 0, every response token mask 1
    for ep in episodes:
        assert ep.prompt_ids == ids and ep.response_mask == [1] * len(ep.response_ids) and ep.response_ids
    batch = make_batch(episodes, trainee.pad_id)
    n_prompt = len(ids)
    assert batch.mask[:, :n_prompt].sum() == 0
    lengths = [len(ep.response_ids) for ep in episodes]
    assert batch.mask.sum(dim=1).tolist() == lengths

    # no gradient flows from prompt tokens, through either loss
    with torch.no_grad():
        logp0 = token_log_probs(trainee.actor, batch.input_ids, batch.attention_mask)
    logp = logp0.clone().requires_grad_(True)
    adv = torch.ones_like(logp)
    loss, _ = clipped_policy_loss(logp, logp0 - 0.01, adv, batch.mask)
    loss.backward()
    assert logp.grad is not None
    assert torch.all(logp.grad[:, :n_prompt] == 0)
    assert torch.all(logp.grad[0, n_prompt:n_prompt + lengths[0]] != 0)
    values = torch.zeros_like(logp0, requires_grad=True)
    value_loss(values, torch.ones_like(logp0), batch.mask).backward()
    assert values.grad is not None and torch.all(values.grad[:, :n_prompt] == 0)


def test_warmup_stage_runs_ppo_by_default_and_saves_actor_critic_log(base: Path, tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "relu.py").write_text(RELU)
    cfg = load_stage_config(config_path("warmup"), [
        "engine=trl", "use_cpu=true", f"tasks={tmp_path / 'tasks'}", f"actor_path={base}",
        f"output_dir={tmp_path / 'out'}", "total_steps=2", "global_batch=2", "max_response_tokens=8", "actor_lr=1e-3",
        "critic_lr=1e-3", "eval.backend={kind: stand_in}"], stage="warmup")
    assert cfg.small.warmup_algorithm == "ppo" and cfg.critic_path is None
    out = tmp_path / "out"
    out.mkdir()
    metrics, files = run_warmup_ppo_stage(cfg, out, reward_fn=_scripted_reward)
    assert metrics["warmup_steps"] == 2 and metrics["warmup_episodes"] == 4
    rows = [json.loads(line) for line in Path(files["log"]).read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["value_loss"]) for r in rows)
    assert (out / "actor" / "config.json").exists() and (out / "critic" / "config.json").exists()
    critic_config = json.loads((out / "critic" / "config.json").read_text())
    assert critic_config["architectures"] == ["Qwen2ForTokenClassification"] and len(critic_config["id2label"]) == 1


def test_unknown_warmup_algorithm_is_refused_when_the_file_is_loaded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="small.warmup_algorithm must be one of ppo, grpo, got 'reinforce'"):
        load_stage_config(config_path("warmup"), ["engine=trl", "small.warmup_algorithm=reinforce",
                                                  f"output_dir={tmp_path}"], stage="warmup")
