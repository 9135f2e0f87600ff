"""Single-turn PPO warm-up with a critic on the small-scale path (engine ``trl``, ``small.warmup_algorithm: ppo``).

Stage 1 of the recipe: the policy writes a whole single-file solution in one response. Each step takes
``global_batch`` prompts (tasks round-robin, each repeated ``rollout.n`` times; the prompt is
`cuda_agent.rl.data.single_turn_messages`, the one the GRPO warm-up and verl's ``single_turn_agent`` use), samples
ONE response per prompt with the actor (`cuda_agent.rl.generation.HFGenerator`, as the other stages), scores it with
`warmup_reward` (the evaluator through ``eval.backend``, or the stand-in evaluator on a machine without a GPU), and
forms a one-turn token episode: prompt tokens ``response_mask`` 0, response tokens 1, the reward on the final
response token. The update is exactly the ppo stage's (`cuda_agent.rl.ppo_small.ppo_update`: values from a critic,
GAE gamma 1 / lambda 0.95, clipped token-level loss 0.2 / 0.28, critic MSE); the critic is ``critic_path`` or, when
that is null (the default), a value head initialised from the actor, as the critic stage builds it. The actor and
critic are saved under ``<output_dir>/actor`` and ``<output_dir>/critic``.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.rl.config import WarmupConfig
from cuda_agent.rl.ppo_small import Progress, Trainee, load_trainee, save_run, step_row

log = logging.getLogger(__name__)

RewardFn = Callable[[str, str], float]
"""``(response_text, task_json) -> reward``."""


@dataclass(frozen=True)
class SingleTurnEpisode:
    """One prompt and one response, in the fields `cuda_agent.rl.ppo_small.make_batch` reads."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    reward: float
    text: str


def warmup_reward(text: str, task_json: str, backend: Mapping[str, Any] | None) -> float:
    """The warm-up reward of one response (the GRPO warm-up's too): `cuda_agent.rl.reward.compute_score`."""
    from cuda_agent.rl.reward import compute_score

    return compute_score("cuda_agent", text, None, {"task_json": task_json}, dict(backend or {"kind": "local"}))


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]], max_prompt_tokens: int | None) -> list[int]:
    """The chat prompt with the assistant header; longer than ``max_prompt_tokens`` keeps its last tokens."""
    ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False))
    if max_prompt_tokens and len(ids) > max_prompt_tokens:
        log.warning("warm-up prompt of %d tokens cut to its last %d", len(ids), max_prompt_tokens)
        ids = ids[-max_prompt_tokens:]
    return ids


def sample_episode(generate: Any, tokenizer: Any, prompt: list[int], task_json: str, reward_fn: RewardFn,
                   max_tokens: int) -> SingleTurnEpisode:
    """Generate one response to ``prompt`` and score it."""
    out = asyncio.run(generate(list(prompt), {"max_tokens": max_tokens}))
    response = list(out.token_ids)
    text = tokenizer.decode(response, skip_special_tokens=True)
    reward = float(reward_fn(text, task_json)) if response else 0.0
    return SingleTurnEpisode(list(prompt), response, [1] * len(response), reward, text)


def warmup_step(trainee: Trainee, generate: Any, prompts: Sequence[tuple[list[int], str]], reward_fn: RewardFn,
                max_tokens: int, step: int) -> tuple[dict[str, Any] | None, list[SingleTurnEpisode]]:
    """One warm-up PPO step over ``prompts`` (``(prompt_ids, task_json)`` pairs): the log row (None when no
    response had a token) and the episodes."""
    episodes = [sample_episode(generate, trainee.tokenizer, ids, tj, reward_fn, max_tokens) for ids, tj in prompts]
    usable = [ep for ep in episodes if ep.response_ids]
    if not usable:
        log.warning("warmup step %d: every response was empty; skipped", step)
        return None, episodes
    return step_row(step, trainee.update(usable), [ep.reward for ep in episodes]), episodes


def run_warmup_ppo_stage(cfg: WarmupConfig, out: Path, progress: Progress | None = None,
                         reward_fn: RewardFn | None = None) -> tuple[dict[str, float], dict[str, str]]:
    """The ``warmup`` stage of the small path with PPO. ``reward_fn`` defaults to `warmup_reward` over
    ``eval.backend``. Raises `ConfigError` for a missing ``actor_path`` / ``total_steps`` / ``max_response_tokens``."""
    from cuda_agent.rl.data import single_turn_messages
    from cuda_agent.rl.generation import HFGenerator
    from cuda_agent.rl.stage_io import load_task_list

    trainee = load_trainee(cfg)
    backend = cfg.eval.backend
    score = reward_fn or (lambda text, tj: warmup_reward(text, tj, backend))
    repeats = max(1, cfg.rollout.n)
    order = [(prompt_ids(trainee.tokenizer, single_turn_messages(t), cfg.max_prompt_tokens), json.dumps(t.to_dict()))
             for t in load_task_list(cfg) for _ in range(repeats)]
    generator = HFGenerator(trainee.actor, trainee.tokenizer, temperature=trainee.settings.temperature)
    per_step, steps = cfg.global_batch, int(cfg.need("total_steps"))
    max_tokens = cfg.max_response_tokens
    history: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    done = 0
    for step in range(1, steps + 1):
        prompts = [order[(done + i) % len(order)] for i in range(per_step)]
        done += per_step
        row, episodes = warmup_step(trainee, generator, prompts, score, max_tokens, step)
        samples += [{"step": step, "task": json.loads(tj).get("id"), "reward": ep.reward, "text": ep.text}
                    for (_, tj), ep in zip(prompts, episodes)]
        if row is None:
            continue
        history.append(row)
        log.info("warmup step %d: %s", step, row)
        if progress is not None:
            progress("warmup", step, steps)
    (out / "responses.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return save_run(out, "warmup", trainee, history, done)
