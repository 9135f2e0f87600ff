"""The small-scale path (one GPU or a CPU): each stage with TRL or the transformers ``Trainer``.

- warmup (``small.warmup_algorithm``): ``ppo`` (default) is single-turn PPO with a critic
  (`cuda_agent.rl.warmup_ppo`: one response per prompt, the ppo stage's update, the critic a value head initialised
  from the actor); ``grpo`` is TRL ``GRPOTrainer`` (token-level loss ``loss_type="dapo"``, clipping 0.2 / 0.28, no
  KL, no critic). Both score with `cuda_agent.rl.warmup_ppo.warmup_reward` (`cuda_agent.rl.reward.compute_score`:
  the evaluator, or the stand-in evaluator on a CPU).
- collect: the actor drives `AgentEnv` through `run_token_episode` (a transformers ``generate`` server);
  trajectories in the agent's JSONL format. Scripted episodes (a `ScriptedGenerationServer`) may be added.
- rft: the filter, then TRL ``SFTTrainer`` on the kept conversations, loss on model tokens only.
- critic: the transformers ``Trainer`` on a token-classification value head initialised from the actor; targets
  from `cuda_agent.rl.critic` (outcome reward at the final model token, GAE gamma 1, lambda 0.95, MSE).
- ppo (``small.ppo_algorithm``): ``ppo`` (default) is agentic multi-turn PPO from the RFT actor and the pre-trained
  critic (`cuda_agent.rl.ppo_small`: clipped token-level loss 0.2 / 0.28, GAE gamma 1 / lambda 0.95, observation
  tokens masked; our own torch loop, since TRL has no critic-based PPO with environment hooks); ``grpo`` is TRL
  ``GRPOTrainer`` with the environment adapter (`cuda_agent.rl.trl_adapter`) as its ``rollout_func``
  (group-relative advantages, no critic).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from cuda_agent.rl.config import CollectConfig, CriticConfig, PpoConfig, RftConfig, RolloutStage, StageConfig, WarmupConfig
from cuda_agent.rl.generation import HFGenerator, collect_episode, rollout_limits
from cuda_agent.rl.stage_io import Progress, StageResult, load_task_list, out_dir_of

log = logging.getLogger(__name__)


def run_small_stage(cfg: StageConfig, progress: Progress | None = None) -> StageResult:
    out = out_dir_of(cfg)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(cfg, PpoConfig):
        metrics, files = _ppo(cfg, out, progress)
    elif isinstance(cfg, WarmupConfig):
        metrics, files = _warmup(cfg, out, progress)
    elif isinstance(cfg, CollectConfig):
        metrics, files = _collect(cfg, out)
    elif isinstance(cfg, RftConfig):
        metrics, files = _rft(cfg, out)
    else:
        assert isinstance(cfg, CriticConfig)
        metrics, files = _critic(cfg, out)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return StageResult(cfg.stage, "trl", out, metrics, files)


def _load_actor(path: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    return AutoModelForCausalLM.from_pretrained(path), tokenizer


def _history(trainer: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in trainer.state.log_history]


def _save_log(out: Path, stage: str, history: list[dict[str, Any]]) -> str:
    path = out / f"{stage}_log.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in history))
    return str(path)


def _grpo_args(cfg: RolloutStage, out: Path, **extra: Any) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out / "trainer"), max_steps=int(cfg.need("total_steps")),
        per_device_train_batch_size=cfg.global_batch, num_generations=cfg.rollout.n,
        learning_rate=cfg.actor_lr, epsilon=cfg.clip_ratio_low, epsilon_high=cfg.clip_ratio_high, loss_type="dapo",
        beta=0.0, temperature=cfg.rollout.temperature, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=cfg.use_cpu, seed=cfg.seed, max_completion_length=cfg.max_response_tokens,
        gradient_checkpointing=False, **extra)


def _warmup(cfg: WarmupConfig, out: Path,
            progress: Progress | None = None) -> tuple[dict[str, float], dict[str, str]]:
    if cfg.small.warmup_algorithm == "grpo":
        return _warmup_grpo(cfg, out)
    from cuda_agent.rl.warmup_ppo import run_warmup_ppo_stage

    return run_warmup_ppo_stage(cfg, out, progress)


def _warmup_grpo(cfg: WarmupConfig, out: Path) -> tuple[dict[str, float], dict[str, str]]:
    from datasets import Dataset
    from trl import GRPOTrainer

    from cuda_agent.rl.data import single_turn_messages
    from cuda_agent.rl.warmup_ppo import warmup_reward

    model, tokenizer = _load_actor(cfg.actor_path)
    tasks = load_task_list(cfg)
    rows = [{"prompt": single_turn_messages(t), "task_json": json.dumps(t.to_dict())} for t in tasks]
    backend = cfg.eval.backend

    def evaluator_reward(completions: list[Any], task_json: list[str], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        return [warmup_reward(text, tj, backend) for text, tj in zip(texts, task_json)]

    trainer = GRPOTrainer(model=model, reward_funcs=evaluator_reward, args=_grpo_args(cfg, out),
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    trainer.train()
    final = out / "actor"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    history = _history(trainer)
    return {"warmup_steps": float(trainer.state.global_step)}, {"actor": str(final), "log": _save_log(out, "warmup", history)}


def _collect(cfg: CollectConfig, out: Path) -> tuple[dict[str, float], dict[str, str]]:
    from cuda_agent.rl.envfactory import make_env
    from cuda_agent.rl.scripted import ScriptedGenerationServer

    model, tokenizer = _load_actor(cfg.actor_path)
    model.eval()
    tasks = load_task_list(cfg)
    traj_dir = out / "trajectories"
    traj_dir.mkdir(parents=True, exist_ok=True)
    limits = rollout_limits(cfg)
    settings = {"env": cfg.env, "backend": cfg.eval.backend}
    generator = HFGenerator(model, tokenizer, temperature=cfg.rollout.temperature)
    rewards: list[float] = []
    policy_turns = 0
    for r in range(cfg.episodes_per_task):
        for task in tasks:
            env = make_env(settings)
            try:
                ep = collect_episode(env, task, generator, tokenizer, limits, traj_dir / f"policy-{task.name or 't'}-{r}.jsonl")
            finally:
                env.close()
            rewards.append(ep.reward)
            policy_turns += ep.assistant_turns
    scripted = cfg.scripted_episodes
    n_scripted = 0
    if scripted:
        from cuda_agent.rl.rollout import RolloutLimits

        scripts = json.loads(Path(scripted).read_text())
        server = ScriptedGenerationServer([s["turns"] for s in scripts], tokenizer)
        big = RolloutLimits(max_turns=150, response_length=10**9, max_tokens_per_turn=10**9)
        by_id = {t.id: t for t in tasks}
        for i, script in enumerate(scripts):
            env = make_env(settings)
            try:
                ep = collect_episode(env, by_id[script["task_id"]], server.as_generate_fn(f"s{i}"), tokenizer, big,
                                     traj_dir / f"scripted-{i}-{script.get('name', '')}.jsonl")
            finally:
                env.close()
            n_scripted += 1
    metrics = {"collect_episodes": float(len(rewards)), "collect_policy_mean_reward": sum(rewards) / max(1, len(rewards)),
               "collect_policy_turns": float(policy_turns), "collect_scripted_episodes": float(n_scripted)}
    return metrics, {"trajectories": str(traj_dir)}


def _tokenized_trajectories(paths: list[Path], tokenizer: Any, max_len: int) -> list[dict[str, Any]]:
    from cuda_agent.agent import Trajectory
    from cuda_agent.rl.rollout import tokenize_conversation

    rows = []
    for path in paths:
        trajectory = Trajectory.load(path)
        prompt, response, mask = tokenize_conversation(trajectory.messages(), trajectory.header.get("tools", []),
                                                       tokenizer)
        keep_prompt = max(0, max_len - len(response))
        prompt = prompt[-keep_prompt:] if keep_prompt else []
        response, mask = response[: max_len - len(prompt)], mask[: max_len - len(prompt)]
        rows.append({"input_ids": prompt + response, "assistant_masks": [0] * len(prompt) + mask,
                     "prompt_len": len(prompt), "reward": float(trajectory.reward or 0.0)})
    return rows


def _rft(cfg: RftConfig, out: Path) -> tuple[dict[str, float], dict[str, str]]:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from cuda_agent.rl.filters import FilterConfig, select

    model, tokenizer = _load_actor(cfg.actor_path)
    tokenizer.padding_side = "right"
    paths = sorted(Path(cfg.trajectories).glob("*.jsonl"))
    kept, reasons = select(paths, FilterConfig(max_repeats=cfg.filter.max_repeats))
    (out / "filter.json").write_text(json.dumps({"kept": [str(p) for p in kept], "reasons": reasons}, indent=2))
    rows = _tokenized_trajectories(kept, tokenizer, cfg.max_length)
    data = Dataset.from_list([{"input_ids": r["input_ids"], "assistant_masks": r["assistant_masks"]} for r in rows])
    args = SFTConfig(output_dir=str(out / "trainer"), max_steps=int(cfg.need("total_steps")),
                     per_device_train_batch_size=cfg.global_batch, learning_rate=cfg.actor_lr, logging_steps=1,
                     save_strategy="no", report_to=[], use_cpu=cfg.use_cpu, max_length=cfg.max_length, seed=cfg.seed)
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    trainer.train()
    final = out / "actor"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    metrics = {"rft_steps": float(trainer.state.global_step), "rft_trajectories": float(len(paths)),
               "rft_kept": float(len(kept))}
    return metrics, {"actor": str(final), "log": _save_log(out, "rft", _history(trainer))}


def _critic(cfg: CriticConfig, out: Path) -> tuple[dict[str, float], dict[str, str]]:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, Trainer, TrainingArguments

    from cuda_agent.rl.critic import gae_targets, outcome_rewards, value_loss
    from cuda_agent.rl.filters import FilterConfig, select
    from cuda_agent.rl.ppo_small import token_values, value_head_from

    source = cfg.actor_path
    tokenizer = AutoTokenizer.from_pretrained(source)
    critic = value_head_from(source)
    paths = sorted(Path(cfg.need("trajectories")).glob("*.jsonl"))
    if cfg.only_kept:
        paths, _ = select(paths, FilterConfig(max_repeats=cfg.filter.max_repeats))
    rows = _tokenized_trajectories(paths, tokenizer, int(cfg.need("max_length")))
    gamma, lam = cfg.gamma, cfg.lam

    def collate(batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in batch)
        pad = tokenizer.pad_token_id
        ids = torch.tensor([r["input_ids"] + [pad] * (width - len(r["input_ids"])) for r in batch])
        attn = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in batch])
        mask = torch.tensor([r["assistant_masks"] + [0] * (width - len(r["assistant_masks"])) for r in batch])
        return {"input_ids": ids, "attention_mask": attn, "response_mask": mask,
                "reward": torch.tensor([r["reward"] for r in batch])}

    class CriticTrainer(Trainer):
        """The transformers Trainer with the critic's loss: MSE to GAE returns over model tokens."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # type: ignore[override]
            # the value of token t is read at position t - 1, the state before the token (as verl and the ppo stage)
            values = token_values(model, inputs["input_ids"], inputs["attention_mask"])
            mask = inputs["response_mask"]
            with torch.no_grad():
                rewards = outcome_rewards(mask, inputs["reward"])
                _, returns = gae_targets(rewards, values.detach(), mask, gamma, lam)
            loss = value_loss(values, returns, mask)
            return (loss, {"values": values}) if return_outputs else loss

    args = TrainingArguments(output_dir=str(out / "trainer"), max_steps=int(cfg.need("total_steps")),
                             per_device_train_batch_size=cfg.global_batch, learning_rate=cfg.critic_lr,
                             logging_steps=1, save_strategy="no", report_to=[], use_cpu=cfg.use_cpu,
                             remove_unused_columns=False, seed=cfg.seed)
    data = Dataset.from_list([{k: r[k] for k in ("input_ids", "assistant_masks", "reward")} for r in rows])
    trainer = CriticTrainer(model=critic, args=args, train_dataset=data, data_collator=collate)
    trainer.train()
    final = out / "critic"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    return ({"critic_steps": float(trainer.state.global_step), "critic_trajectories": float(len(rows))},
            {"critic": str(final), "log": _save_log(out, "critic", _history(trainer))})


def _ppo(cfg: PpoConfig, out: Path,
         progress: Progress | None = None) -> tuple[dict[str, float], dict[str, str]]:
    if cfg.small.ppo_algorithm == "grpo":
        return _ppo_grpo(cfg, out)
    from cuda_agent.rl.ppo_small import run_ppo_stage

    return run_ppo_stage(cfg, out, progress)


def _ppo_grpo(cfg: PpoConfig, out: Path) -> tuple[dict[str, float], dict[str, str]]:
    from datasets import Dataset
    from trl import GRPOTrainer

    from cuda_agent.rl.trl_adapter import EnvRollout, env_reward

    model, tokenizer = _load_actor(cfg.actor_path)
    tasks = load_task_list(cfg)
    rollout = EnvRollout(tasks, tokenizer, {"env": cfg.env, "backend": cfg.eval.backend}, rollout_limits(cfg),
                         temperature=cfg.rollout.temperature, log_dir=out / "trajectories")
    rows = [{"prompt": [{"role": "user", "content": t.id}], "task_id": t.id} for t in tasks]
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward, args=_grpo_args(cfg, out),
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer, rollout_func=rollout)
    trainer.train()
    final = out / "actor"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(final)
    return ({"ppo_steps": float(trainer.state.global_step), "ppo_episodes": float(rollout.episodes)},
            {"actor": str(final), "log": _save_log(out, "ppo", _history(trainer))})
