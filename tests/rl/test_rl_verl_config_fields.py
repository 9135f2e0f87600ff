"""Each stage's generated verl config, field by field, from a known input.

Every stage setting is overridden with a value of its own (no two alike, none equal to the file's), so a setting
that reaches the wrong verl key, or none, or a default that stands in for it, fails here. The expected values are
what the generator wrote before the stage configs were typed (the dotted look-ups of the first version); the test
runs unchanged against that version.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cuda_agent.locations import rl_config_path
from cuda_agent.rl.config import load_stage_config
from cuda_agent.rl.stages import run_stage
from rl_samples import RELU

ROLLOUT = ["global_batch=64", "mini_batch=16", "actor_lr=1.5e-6", "critic_lr=2.5e-6", "clip_ratio_low=0.1",
           "clip_ratio_high=0.3", "loss_agg_mode=seq-mean-token-mean", "gamma=0.99", "lam=0.9",
           "max_prompt_tokens=1000", "max_response_tokens=3000", "sequence_parallel=2", "cluster.gpus_per_node=4",
           "cluster.train_nodes=3", "total_steps=9", "epochs=7", "save_every=3", "loggers=[console, wandb]",
           "rollout.engine=sglang", "rollout.n=4", "rollout.temperature=0.7", "rollout.tensor_parallel=2",
           "rollout.gpu_memory_utilization=0.5", "rollout.agent_workers=3", "actor_path=/m/actor",
           "eval.backend={kind: http, url: 'http://e:1'}", "verl.trainer.seed_marker=7"]
AGENT = ["max_turns=40", "max_tokens_per_turn=500", "max_observation_tokens=300", "env={max_turns: 41}"]
BACKEND = {"kind": "http", "url": "http://e:1"}

SHARED = {
    "data.train_batch_size": 64, "data.max_prompt_length": 1000, "data.max_response_length": 3000,
    "data.return_raw_chat": True, "data.truncation": "left",
    "actor_rollout_ref.model.path": "/m/actor", "actor_rollout_ref.model.use_remove_padding": True,
    "actor_rollout_ref.actor.optim.lr": 1.5e-6, "actor_rollout_ref.actor.ppo_mini_batch_size": 16,
    "actor_rollout_ref.actor.clip_ratio_low": 0.1, "actor_rollout_ref.actor.clip_ratio_high": 0.3,
    "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean", "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 2000,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 2,
    "actor_rollout_ref.ref.ulysses_sequence_parallel_size": 2,
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": 2000,
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": 2000,
    "actor_rollout_ref.rollout.name": "sglang", "actor_rollout_ref.rollout.mode": "async",
    "actor_rollout_ref.rollout.n": 4, "actor_rollout_ref.rollout.temperature": 0.7,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5, "actor_rollout_ref.rollout.max_model_len": 4000,
    "critic.enable": True, "critic.optim.lr": 2.5e-6, "critic.ppo_mini_batch_size": 16,
    "critic.ppo_max_token_len_per_gpu": 2000, "critic.forward_max_token_len_per_gpu": 2000,
    "critic.ulysses_sequence_parallel_size": 2,
    "algorithm.adv_estimator": "gae", "algorithm.gamma": 0.99, "algorithm.lam": 0.9,
    "trainer.nnodes": 3, "trainer.n_gpus_per_node": 4, "trainer.total_training_steps": 9, "trainer.total_epochs": 7,
    "trainer.use_v1": True, "trainer.save_freq": 3, "trainer.logger": ["console", "wandb"],
    "trainer.seed_marker": 7, "cuda_agent.backend": BACKEND,
}
MULTI_TURN = {
    "actor_rollout_ref.rollout.multi_turn.enable": True,
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 40,
    "actor_rollout_ref.rollout.multi_turn.format": "hermes",
    "actor_rollout_ref.rollout.agent.default_agent_loop": "cuda_agent",
    "actor_rollout_ref.rollout.agent.num_workers": 3,
    "cuda_agent.env": {"max_turns": 41}, "cuda_agent.max_turns": 40, "cuda_agent.max_tokens_per_turn": 500,
    "cuda_agent.max_observation_tokens": 300,
}
CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "warmup": (ROLLOUT + ["critic_path=null"], {
        **SHARED, "critic.model.path": "/m/actor", "trainer.critic_warmup": 0, "trainer.experiment_name": "warmup",
        "actor_rollout_ref.rollout.agent.default_agent_loop": "single_turn_agent",
        "reward.custom_reward_function.name": "compute_score",
        "reward.custom_reward_function.reward_kwargs": {"backend": BACKEND},
        "cuda_agent.env": {}, "cuda_agent.max_turns": 150, "cuda_agent.max_tokens_per_turn": 8192,
        "cuda_agent.max_observation_tokens": None}),
    "critic": (ROLLOUT + AGENT + ["critic_path=/m/critic"], {
        **SHARED, **MULTI_TURN, "critic.model.path": "/m/critic", "trainer.critic_warmup": 10,
        "trainer.experiment_name": "critic"}),
    "ppo": (ROLLOUT + AGENT + ["critic_path=/m/critic", "critic_warmup=5"], {
        **SHARED, **MULTI_TURN, "critic.model.path": "/m/critic", "trainer.critic_warmup": 5,
        "trainer.experiment_name": "ppo"}),
    "rft": (["global_batch=32", "actor_lr=2e-6", "max_length=6000", "sequence_parallel=2", "epochs=3",
             "total_steps=11", "loggers=[console, wandb]", "cluster.gpus_per_node=4",
             "actor_path=/m/warm", "verl.trainer.seed_marker=7"], {
        "data.val_files": None, "data.train_batch_size": 32, "data.max_length": 6000,
        "data.max_token_len_per_gpu": 3000, "data.use_dynamic_bsz": True, "data.truncation": "left",
        "data.messages_key": "messages", "data.tools_key": "tools",
        "data.custom_cls.name": "ExactToolsSFTDataset", "model.path": "/m/warm", "model.use_remove_padding": True,
        "engine.ulysses_sequence_parallel_size": 2, "optim.lr": 2e-6, "trainer.total_epochs": 3,
        "trainer.total_training_steps": 11, "trainer.project_name": "cuda_agent", "trainer.experiment_name": "rft",
        "trainer.save_freq": -1, "trainer.logger": ["console", "wandb"], "trainer.nnodes": 1,
        "trainer.n_gpus_per_node": 4, "trainer.seed_marker": 7}),
}


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1, "a": {...}}``: every node under its dotted path."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out[prefix + key] = value
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
    return out


def generated(tmp_path: Path, stage: str, overrides: list[str]) -> tuple[dict[str, Any], tuple[str, ...]]:
    tasks = tmp_path / "tasks"
    tasks.mkdir(exist_ok=True)
    (tasks / "relu.py").write_text(RELU)
    where = [f"trajectories={tmp_path / 'none'}"] if stage == "rft" else [f"tasks={tasks}"]
    cfg = load_stage_config(rl_config_path(stage), where + [f"output_dir={tmp_path / stage}", *overrides])
    result = run_stage(cfg, dry_run=True)
    return yaml.safe_load(Path(result.files["verl_config"]).read_text()), result.command


@pytest.mark.parametrize("stage", sorted(CASES))
def test_every_setting_reaches_its_verl_key(stage: str, tmp_path: Path) -> None:
    overrides, expected = CASES[stage]
    tree, command = generated(tmp_path, stage, overrides)
    fields = flat(tree)
    wrong = {key: (fields.get(key, "<missing>"), want) for key, want in expected.items()
             if fields.get(key, "<missing>") != want}
    assert not wrong, wrong
    out = (tmp_path / stage).resolve()
    assert fields["trainer.default_local_dir"] == str(out / "checkpoints")
    assert command[-2:] == (f"--config-path={out}", f"--config-name=verl_{stage}")


def test_the_files_as_shipped_generate_the_paper_recipe(tmp_path: Path) -> None:
    """No overrides but the data: the committed files' own numbers (configs/rl/*.yaml) reach verl."""
    ppo = flat(generated(tmp_path, "ppo", [])[0])
    assert (ppo["data.train_batch_size"], ppo["actor_rollout_ref.actor.ppo_mini_batch_size"]) == (1024, 256)
    assert (ppo["data.max_prompt_length"], ppo["data.max_response_length"]) == (16_384, 114_688)
    assert ppo["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"] == 32_768  # 131,072 over SP 4
    assert ppo["actor_rollout_ref.rollout.agent.num_workers"] == 16 and ppo["trainer.total_training_steps"] == 150
    assert ppo["cuda_agent.backend"] == {"kind": "ray", "address": "auto"} and ppo["cuda_agent.env"] == {"max_turns": 150}
    warm = flat(generated(tmp_path, "warmup", [])[0])
    assert warm["actor_rollout_ref.model.path"] == warm["critic.model.path"] == "Qwen/Qwen3-8B"
    assert (warm["actor_rollout_ref.rollout.max_model_len"], warm["trainer.total_training_steps"]) == (32_768, 200)
    assert warm["trainer.save_freq"] == 20
    rft = flat(generated(tmp_path, "rft", [])[0])
    assert (rft["trainer.total_epochs"], rft["trainer.total_training_steps"], rft["trainer.save_freq"]) == (1, None, -1)
