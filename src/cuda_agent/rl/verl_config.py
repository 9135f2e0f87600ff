"""What each stage hands verl: a Hydra config file (written next to the run, so a user sees exactly what verl
receives) and the command that launches it.

PPO-style stages (warm-up, critic pre-training, agentic PPO) compose verl's ``ppo_trainer`` config; RFT composes
``sft_trainer_engine``. Anything under ``verl:`` in the stage config is merged last, as raw verl keys.

Choices written down here because verl's defaults decide them otherwise:

- verl's v1 trainer (``trainer.use_v1: true``, verl 0.9's default; the v0 trainer is deprecated) with its
  TransferQueue, which the RL environment installs (``transferqueue``, requirements/rl.lock).
- Every path verl reads (model, data, agent-loop registry, checkpoint folder) is absolute: verl's workers run on
  other nodes, in other working directories.
- Sequence parallelism (Ulysses, ``sequence_parallel`` in the stage file) divides a sample over that many GPUs, so
  the per-GPU token budget is ``ceil(context / sequence_parallel)``; verl asserts that budget times the SP size
  holds the longest sample. SP needs remove-padding, which is switched on with it.
- ``critic_warmup``: verl counts steps from 1 and updates the actor when ``critic_warmup <= step``; the critic
  stage sets it to ``total_steps + 1`` so the actor never updates.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any, Mapping

from cuda_agent.errors import ConfigError
from cuda_agent.rl.config import AgentSettings, RftConfig, RolloutStage, TrainingStage

AGENT_LOOP_TARGET = "cuda_agent.rl.verl_agent_loop.CudaAgentLoop"


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    node = tree
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if "." in key:
            _set(base, key, value)
        elif isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def hydra_settings(out_dir: Path) -> dict[str, Any]:
    """verl's config tree on Hydra's search path, and Hydra's own run folder under the stage's output (Hydra's
    default, ``outputs/<date>/<time>`` in the working directory, would litter wherever the command runs)."""
    return {"searchpath": ["pkg://verl.trainer.config"],
            "run": {"dir": str(out_dir / "hydra" / "${now:%Y-%m-%d_%H-%M-%S}")}}


def agent_loop_registry(out_dir: Path) -> Path:
    """The YAML verl reads through ``rollout.agent.agent_loop_config_path``."""
    path = out_dir / "agent_loops.yaml"
    path.write_text(f"- name: cuda_agent\n  _target_: {AGENT_LOOP_TARGET}\n")
    return path


def model_path(value: Any) -> str:
    """A model folder as an absolute path; a Hugging Face id (no such folder here, ``org/name``) stays as it is.
    A relative folder that does not exist yet (the previous stage's output) is made absolute too."""
    text = str(value)
    path = Path(text).expanduser()
    if path.exists() or text.startswith((".", "~", "/")) or text.count("/") != 1:
        return str(path.resolve())
    return text


def sequence_parallel(cfg: TrainingStage, context: int) -> tuple[int, int]:
    """``(sp_size, per-GPU token budget)`` for samples of ``context`` tokens. Raises `ConfigError` when the SP
    size does not divide the GPUs of a node (verl shards SP groups within the data-parallel mesh)."""
    sp, gpus = cfg.sequence_parallel, cfg.cluster.gpus_per_node
    if sp < 1 or gpus % sp:
        raise ConfigError(f"{cfg.source or cfg.stage}: sequence_parallel={sp} must be >= 1 and divide "
                          f"cluster.gpus_per_node={gpus}")
    return sp, math.ceil(context / sp)


def ppo_config(cfg: RolloutStage, out_dir: Path, train_file: Path, val_file: Path | None = None) -> dict[str, Any]:
    """verl ``ppo_trainer`` settings for the warm-up (single turn), critic and ppo (multi-turn) stages."""
    stage = cfg.stage
    multi_turn = isinstance(cfg, AgentSettings)
    prompt_len = int(cfg.need("max_prompt_tokens"))
    response_len = cfg.max_response_tokens
    steps = int(cfg.need("total_steps"))
    sp, budget = sequence_parallel(cfg, prompt_len + response_len)
    loop = cfg if isinstance(cfg, AgentSettings) else AgentSettings()
    out_dir = out_dir.resolve()
    tree: dict[str, Any] = {"hydra": hydra_settings(out_dir), "defaults": ["ppo_trainer", "_self_"]}
    values = {
        "data.train_files": str(Path(train_file).resolve()),
        "data.val_files": str(Path(val_file or train_file).resolve()),
        "data.train_batch_size": cfg.global_batch,
        "data.max_prompt_length": prompt_len,
        "data.max_response_length": response_len,
        "data.return_raw_chat": True,
        "data.truncation": "left",
        "actor_rollout_ref.model.path": model_path(cfg.actor_path),
        "actor_rollout_ref.model.use_remove_padding": True,
        "actor_rollout_ref.actor.optim.lr": cfg.actor_lr,
        "actor_rollout_ref.actor.ppo_mini_batch_size": cfg.minibatch,
        "actor_rollout_ref.actor.clip_ratio_low": cfg.clip_ratio_low,
        "actor_rollout_ref.actor.clip_ratio_high": cfg.clip_ratio_high,
        "actor_rollout_ref.actor.loss_agg_mode": cfg.loss_agg_mode,
        "actor_rollout_ref.actor.use_kl_loss": False,
        "actor_rollout_ref.actor.entropy_coeff": 0.0,
        "actor_rollout_ref.actor.use_dynamic_bsz": True,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": budget,
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size": sp,
        "actor_rollout_ref.ref.ulysses_sequence_parallel_size": sp,
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": budget,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": True,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": budget,
        "actor_rollout_ref.rollout.name": cfg.rollout.engine,
        "actor_rollout_ref.rollout.mode": "async",
        "actor_rollout_ref.rollout.n": cfg.rollout.n,
        "actor_rollout_ref.rollout.temperature": cfg.rollout.temperature,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": cfg.rollout.tensor_parallel,
        "actor_rollout_ref.rollout.gpu_memory_utilization": cfg.rollout.gpu_memory_utilization,
        "actor_rollout_ref.rollout.max_model_len": prompt_len + response_len,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "critic.enable": True,
        "critic.model.path": model_path(cfg.critic_path or cfg.actor_path),
        "critic.model.use_remove_padding": True,
        "critic.optim.lr": cfg.critic_lr,
        "critic.ppo_mini_batch_size": cfg.minibatch,
        "critic.use_dynamic_bsz": True,
        "critic.ppo_max_token_len_per_gpu": budget,
        "critic.forward_max_token_len_per_gpu": budget,
        "critic.ulysses_sequence_parallel_size": sp,
        "algorithm.adv_estimator": "gae",
        "algorithm.gamma": cfg.gamma,
        "algorithm.lam": cfg.lam,
        "algorithm.use_kl_in_reward": False,
        "trainer.nnodes": cfg.cluster.train_nodes,
        "trainer.n_gpus_per_node": cfg.cluster.gpus_per_node,
        "trainer.total_training_steps": steps,
        "trainer.total_epochs": cfg.epochs,
        # verl updates the actor at step s (counted from 1) when critic_warmup <= s: total_steps + 1 never does
        "trainer.critic_warmup": steps + 1 if stage == "critic" else cfg.critic_warmup,
        "trainer.use_v1": True,
        "trainer.project_name": "cuda_agent",
        "trainer.experiment_name": f"{stage}",
        "trainer.default_local_dir": str(out_dir / "checkpoints"),
        "trainer.save_freq": cfg.save_every,
        "trainer.val_before_train": False,
        "trainer.test_freq": -1,
        "trainer.logger": list(cfg.loggers),
    }
    if multi_turn:
        values.update({
            "actor_rollout_ref.rollout.multi_turn.enable": True,
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": loop.max_turns,
            "actor_rollout_ref.rollout.multi_turn.format": "hermes",
            "actor_rollout_ref.rollout.agent.default_agent_loop": "cuda_agent",
            "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(agent_loop_registry(out_dir)),
            "actor_rollout_ref.rollout.agent.num_workers": cfg.rollout.agent_workers,
        })
    else:
        from cuda_agent.rl import reward as reward_module

        values.update({
            "actor_rollout_ref.rollout.agent.default_agent_loop": "single_turn_agent",
            "reward.custom_reward_function.path": str(Path(reward_module.__file__).resolve()),
            "reward.custom_reward_function.name": "compute_score",
            "reward.custom_reward_function.reward_kwargs": {"backend": dict(cfg.eval.backend)},
        })
    for key, value in values.items():
        _set(tree, key, value)
    tree["cuda_agent"] = {
        "env": dict(loop.env),
        "backend": dict(cfg.eval.backend),
        "max_turns": loop.max_turns,
        "max_tokens_per_turn": loop.max_tokens_per_turn,
        "max_observation_tokens": loop.max_observation_tokens,
    }
    return _merge(tree, cfg.verl)


def sft_config(cfg: RftConfig, out_dir: Path, train_file: Path) -> dict[str, Any]:
    """verl ``sft_trainer_engine`` settings for rejection fine-tuning (multi-turn chat, assistant tokens only)."""
    max_length = cfg.max_length
    sp, budget = sequence_parallel(cfg, max_length)
    tree: dict[str, Any] = {"hydra": hydra_settings(out_dir.resolve()), "defaults": ["sft_trainer_engine", "_self_"]}
    values = {
        "data.train_files": str(Path(train_file).resolve()),
        "data.val_files": None,
        "data.train_batch_size": cfg.global_batch,
        "data.max_length": max_length,
        "data.max_token_len_per_gpu": budget,
        "data.use_dynamic_bsz": True,
        "data.truncation": "left",
        "data.messages_key": "messages",
        "data.tools_key": "tools",
        "data.custom_cls.path": str(Path(__file__).with_name("verl_sft_data.py").resolve()),
        "data.custom_cls.name": "ExactToolsSFTDataset",
        "model.path": model_path(cfg.actor_path),
        "model.use_remove_padding": True,
        "engine.ulysses_sequence_parallel_size": sp,
        "optim.lr": cfg.actor_lr,
        "trainer.total_epochs": cfg.epochs,
        "trainer.total_training_steps": cfg.total_steps,
        "trainer.project_name": "cuda_agent",
        "trainer.experiment_name": "rft",
        "trainer.default_local_dir": str(out_dir.resolve() / "checkpoints"),
        "trainer.save_freq": cfg.save_every,
        "trainer.logger": list(cfg.loggers),
        "trainer.nnodes": cfg.cluster.train_nodes,
        "trainer.n_gpus_per_node": cfg.cluster.gpus_per_node,
    }
    for key, value in values.items():
        _set(tree, key, value)
    return _merge(tree, cfg.verl)


def write_config(tree: Mapping[str, Any], out_dir: Path, name: str) -> Path:
    import yaml

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.yaml"
    path.write_text("# generated by `cuda-agent train`: exactly what verl receives\n"
                    + yaml.safe_dump(dict(tree), sort_keys=False))
    return path


def launch_command(stage: str, config_path: Path, cfg: TrainingStage) -> list[str]:
    """The command that runs verl on ``config_path``: Ray-driven ``main_ppo`` for PPO-style stages (it joins the
    cluster named by ``RAY_ADDRESS``), ``torchrun`` (``python -m torch.distributed.run`` of this interpreter, so
    verl's environment is the one launched) over the SFT trainer for RFT."""
    import sys

    if stage == "rft":
        cluster = cfg.cluster
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={cluster.train_nodes}",
               f"--nproc_per_node={cluster.gpus_per_node}"]
        if cluster.train_nodes > 1:
            if not cluster.master_addr:
                raise ConfigError(f"{cfg.source or stage}: cluster.master_addr is required for "
                                  f"{cluster.train_nodes} nodes; set it as cluster.master_addr=<head>")
            cmd += [f"--rdzv_endpoint={cluster.master_addr}:{cluster.master_port}", "--rdzv_backend=c10d"]
        return cmd + ["-m", "verl.trainer.sft_trainer", f"--config-path={config_path.parent.resolve()}",
                      f"--config-name={config_path.stem}"]
    return [sys.executable, "-m", "verl.trainer.main_ppo", f"--config-path={config_path.parent.resolve()}",
            f"--config-name={config_path.stem}"]
