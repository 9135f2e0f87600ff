"""The verl agent loop: one `AgentEnv` per trajectory, driven token by token through verl's generation server.

This module imports verl at import time; nothing else in ``cuda_agent`` imports it, and verl loads it by name
(the ``agent_loop_config_path`` YAML written by the ``ppo`` and ``collect`` stages names
``cuda_agent.rl.verl_agent_loop.CudaAgentLoop``; importing this module also registers it as ``cuda_agent``).

Per trajectory ``run`` creates the environment, resets it on the task carried by the dataset row
(``extra_info.task``, a `Task` dict), alternates generation and tool calls (`run_token_episode`), closes the
environment in a ``finally``, and returns verl's ``AgentLoopOutput``: token ids, ``response_mask`` (1 for model
tokens, 0 for observation tokens), log-probabilities when the server gives them, the turn count and the reward
(``reward_score``, which verl puts on the last response token). Settings come from the ``cuda_agent`` section of
verl's config, checked as `cuda_agent.rl.config.LoopSettings`: ``env`` (`EnvConfig` fields), ``backend`` (see
`cuda_agent.rl.envfactory`), ``max_turns``, ``max_tokens_per_turn``, ``max_observation_tokens``,
``use_tokenizer_template``.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import uuid4

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from cuda_agent.rl.chat import ChatFormat
from cuda_agent.rl.config import PAPER, LoopSettings
from cuda_agent.rl.typed import from_mapping
from cuda_agent.rl.envfactory import make_env
from cuda_agent.rl.rollout import RolloutLimits, TokenEpisode, end_on_model_token, run_token_episode
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)
AGENT_NAME = "cuda_agent"


def task_from_row(kwargs: dict[str, Any]) -> Task:
    """The task of a dataset row (``extra_info.task_json``). Raises `KeyError` naming the missing field."""
    from cuda_agent.rl.reward import task_from_extra

    return task_from_extra(kwargs.get("extra_info"))


def settings_from(config: Any) -> LoopSettings:
    """The ``cuda_agent`` section of verl's config, checked (`ConfigError` names a wrong key); absent: defaults."""
    section = config.get("cuda_agent") if hasattr(config, "get") else None
    if section is None:
        return LoopSettings()
    plain = OmegaConf.to_container(section, resolve=True) if OmegaConf.is_config(section) else dict(section)
    return from_mapping(LoopSettings, plain, where="verl config", prefix="cuda_agent.")


def to_output(episode: TokenEpisode, response_length: int, metrics: dict[str, Any]) -> AgentLoopOutput:
    """verl's output for one episode: the response cut to ``response_length`` and then to its last model token
    (verl's reward goes on the last response token; see `end_on_model_token`)."""
    n = response_length
    logprobs = episode.response_logprobs
    ids, mask, cut_logprobs = end_on_model_token(episode.response_ids[:n], episode.response_mask[:n],
                                                 (logprobs or [0.0] * len(episode.response_ids))[:n])
    return AgentLoopOutput(
        prompt_ids=episode.prompt_ids,
        response_ids=ids,
        response_mask=mask,
        response_logprobs=cut_logprobs if logprobs is not None else None,
        reward_score=float(episode.reward),
        num_turns=episode.num_turns,
        metrics=metrics,
        extra_fields={
            "assistant_turns": episode.assistant_turns,
            "malformed_calls": episode.malformed_calls,
            "end_reason": episode.end_reason,
            "turn_scores": [],
            "tool_rewards": [],
        },
    )


@register(AGENT_NAME)
class CudaAgentLoop(AgentLoopBase):
    """verl agent loop over `AgentEnv` (see the module docstring)."""

    def __init__(self, *args: Any, tools: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings_from(self.config)
        multi_turn = self.rollout_config.multi_turn
        self.limits = RolloutLimits(
            max_turns=int(self.settings.max_turns or multi_turn.get("max_assistant_turns") or PAPER.max_turns),
            response_length=int(self.rollout_config.response_length),
            max_tokens_per_turn=self.settings.max_tokens_per_turn,
            max_observation_tokens=self.settings.max_observation_tokens,
        )
        self.chat = ChatFormat(use_tokenizer_template=self.settings.use_tokenizer_template)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task = task_from_row(kwargs)
        request_id = uuid4().hex

        async def generate(context: list[int], params: dict[str, Any]):
            return await self.server_manager.generate(request_id=request_id, prompt_ids=context,
                                                      sampling_params=params)

        env = make_env({"env": self.settings.env, "backend": self.settings.backend})
        try:
            episode = await run_token_episode(env, task, generate, self.tokenizer, sampling_params=sampling_params,
                                              limits=self.limits, chat=self.chat)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, env.close)
        if len(episode.prompt_ids) > self.rollout_config.prompt_length:
            log.warning("task %s: prompt of %d tokens exceeds rollout.prompt_length=%d; raise data.max_prompt_length",
                        task.id, len(episode.prompt_ids), self.rollout_config.prompt_length)
            episode = _left_cut(episode, int(self.rollout_config.prompt_length))
        metrics = {"num_preempted": -1}
        return to_output(episode, self.limits.response_length, metrics)


def _left_cut(episode: TokenEpisode, prompt_length: int) -> TokenEpisode:
    from dataclasses import replace

    return replace(episode, prompt_ids=episode.prompt_ids[-prompt_length:])
