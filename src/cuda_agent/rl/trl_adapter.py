"""The TRL environment adapter: a ``rollout_func`` for ``GRPOTrainer`` that plays whole agent episodes.

TRL calls ``rollout(prompts, trainer)`` with the prompts of this process (each prompt names a task by id; its
sampler has already repeated each prompt ``num_generations`` times, so one episode is played per entry) and
expects, per completion, ``prompt_ids``, ``completion_ids`` and ``logprobs``; extra keys go to the reward
functions, and ``env_mask`` (1 for model tokens, 0 for environment tokens) masks the loss. Each completion is one
episode: a fresh `AgentEnv` (closed in a ``finally``), the trainer's current model as the policy, and the final
reward from the evaluator (`env_reward` hands it to TRL).
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence

from cuda_agent.rl.rollout import RolloutLimits
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)


def _task_id(prompt: Any) -> str:
    if isinstance(prompt, list):
        return str(prompt[-1]["content"]).strip()
    return str(prompt).strip()


class EnvRollout:
    """``rollout_func`` over `AgentEnv` (see the module docstring). ``log_dir``: write each episode's trajectory."""

    def __init__(self, tasks: Sequence[Task], tokenizer: Any, settings: Mapping[str, Any], limits: RolloutLimits,
                 *, temperature: float = 1.0, log_dir: Path | None = None) -> None:
        self.tasks = {t.id: t for t in tasks}
        self.tokenizer = tokenizer
        self.settings = dict(settings)
        self.limits = limits
        self.temperature = temperature
        self.log_dir = log_dir
        self.episodes = 0

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        from cuda_agent.rl.envfactory import make_env
        from cuda_agent.rl.generation import HFGenerator, collect_episode

        model = getattr(trainer, "model_wrapped", None) or trainer.model
        model = getattr(model, "module", model)
        generator = HFGenerator(model, self.tokenizer, temperature=self.temperature)
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                     "env_reward": []}
        for prompt in prompts:
            task_id = _task_id(prompt)
            if task_id not in self.tasks:
                raise KeyError(f"rollout: prompt names task {task_id!r}, which is not in this run's task list")
            env = make_env(self.settings)
            try:
                if self.log_dir is not None:
                    self.log_dir.mkdir(parents=True, exist_ok=True)
                    path = self.log_dir / f"episode-{self.episodes:05d}.jsonl"
                    episode = collect_episode(env, self.tasks[task_id], generator, self.tokenizer, self.limits, path)
                else:
                    from cuda_agent.rl.rollout import run_token_episode

                    episode = asyncio.run(run_token_episode(env, self.tasks[task_id], generator, self.tokenizer,
                                                            limits=self.limits))
            finally:
                env.close()
            self.episodes += 1
            out["prompt_ids"].append(episode.prompt_ids)
            out["completion_ids"].append(episode.response_ids)
            out["logprobs"].append(episode.response_logprobs or [0.0] * len(episode.response_ids))
            out["env_mask"].append(episode.response_mask)
            out["env_reward"].append(float(episode.reward))
        return out


def env_reward(completions: list[Any], env_reward: list[float] | None = None, **_: Any) -> list[float]:
    """TRL reward function: the episode rewards the rollout function computed."""
    if env_reward is None:
        raise KeyError("env_reward missing: use EnvRollout as the trainer's rollout_func")
    return [float(r) for r in env_reward]
