"""One multi-turn episode at the token level: the core shared by the verl agent loop, the TRL adapter and the
``collect`` stage.

The model's tokens go into the response with ``response_mask`` 1; everything the environment adds (tool responses,
chat markers between turns) goes in with ``response_mask`` 0 and log-probability 0. The environment is an
`AgentEnv` (or anything with ``reset``/``step``/``final_reward``/``tool_schemas``); its blocking calls run in a
thread so that many episodes share one event loop. Nothing here imports verl, TRL or transformers.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Protocol, Sequence

from cuda_agent.agent.tool_turn import run_tool_calls
from cuda_agent.agent.types import Message, ToolCall
from cuda_agent.errors import PolicyError
from cuda_agent.rl.chat import IM_END, ChatFormat, TokenizerLike
from cuda_agent.rl.toolparse import ParsedTurn, parse_tool_calls
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)


class GenerationOutput(Protocol):
    """What a generation server returns (verl's ``TokenOutput`` has these attributes)."""

    token_ids: list[int]
    log_probs: list[float] | None


GenerateFn = Callable[[list[int], dict[str, Any]], Awaitable[GenerationOutput]]
TurnCallback = Callable[["TurnEvent"], None]


class EnvLike(Protocol):
    def reset(self, task: Task) -> str: ...

    def step(self, tool_call: ToolCall) -> tuple[str, float, bool, bool, dict[str, Any]]: ...

    def final_reward(self) -> float: ...

    def tool_schemas(self) -> list[dict[str, Any]]: ...

    @property
    def system_prompt(self) -> str: ...

    @property
    def task_prompt(self) -> str: ...


@dataclass(frozen=True)
class RolloutLimits:
    """Budgets of one token-level episode.

    Attributes:
        max_turns: model turns (generations) before the episode is cut (the paper: up to 150).
        response_length: tokens after the prompt (model and observation tokens) before the episode is cut.
        max_tokens_per_turn: most tokens one generation may produce (also bounded by what is left).
        max_observation_tokens: an observation longer than this is cut, keeping its start (None: no cut).
        max_prompt_tokens: a longer first prompt keeps only its last tokens, as verl does (None: no cut; the tiny
            run uses this to fit a CPU).
    """

    max_turns: int = 150
    response_length: int = 131_072
    max_tokens_per_turn: int = 8_192
    max_observation_tokens: int | None = None
    max_prompt_tokens: int | None = None


@dataclass(frozen=True)
class TurnEvent:
    """One model turn and what the environment answered, for trajectory files and progress."""

    index: int
    text: str
    parsed: ParsedTurn
    messages: tuple[Message, ...]
    results: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class TokenEpisode:
    """An episode as a trainer needs it.

    ``num_turns`` follows verl's convention (model turns + observation turns + 1 for the prompt).
    ``end_reason``: the environment's (``submitted``, ``fatal``, ``turns``, ``tokens``, ``wall``), or ``turn_limit``
    / ``length`` when this loop cut the episode. ``calls`` and ``observations`` feed the RFT loop filter.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    reward: float
    assistant_turns: int
    observation_turns: int
    malformed_calls: int
    end_reason: str
    messages: list[Message] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)

    @property
    def num_turns(self) -> int:
        return self.assistant_turns + self.observation_turns + 1


class _Assembly:
    """Accumulates response tokens with their mask and log-probabilities."""

    def __init__(self, prompt_ids: list[int]) -> None:
        self.prompt_ids = list(prompt_ids)
        self.ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.have_logprobs = True

    def add_model(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        self.ids.extend(ids)
        self.mask.extend([1] * len(ids))
        if logprobs is None or len(logprobs) != len(ids):
            self.have_logprobs = False
            self.logprobs.extend([0.0] * len(ids))
        else:
            self.logprobs.extend(float(x) for x in logprobs)

    def add_observation(self, ids: Sequence[int]) -> None:
        self.ids.extend(ids)
        self.mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.ids


async def run_token_episode(
    env: EnvLike,
    task: Task,
    generate: GenerateFn,
    tokenizer: TokenizerLike,
    *,
    sampling_params: Mapping[str, Any] | None = None,
    limits: RolloutLimits = RolloutLimits(),
    chat: ChatFormat = ChatFormat(),
    on_turn: TurnCallback | None = None,
) -> TokenEpisode:
    """Reset ``env`` on ``task`` and alternate generation and tool steps until the environment ends the episode or
    a limit is reached. The caller owns ``env`` (creates it and closes it). Raises `PolicyError` if generation
    fails; environment errors on a tool call become observations (the environment's own rule)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, env.reset, task)
    tools = env.tool_schemas()
    prompt_text = chat.render_prompt(env.system_prompt, env.task_prompt, tools, tokenizer)
    prompt_ids = tokenizer.encode(prompt_text, add_special_tokens=False)
    if limits.max_prompt_tokens is not None and len(prompt_ids) > limits.max_prompt_tokens:
        prompt_ids = prompt_ids[-limits.max_prompt_tokens:]
    asm = _Assembly(prompt_ids)
    messages = [Message("system", env.system_prompt), Message("user", env.task_prompt)]
    eos_id = _eos_id(tokenizer)
    reward: float | None = None
    end_reason = ""
    turns = observation_turns = malformed = 0
    calls_seen: list[tuple[str, str]] = []
    observations: list[str] = []
    base_params = dict(sampling_params or {})
    counted_tail = False  # the response ends on an observation counted in observation_turns

    while True:
        room = limits.response_length - len(asm.ids)
        if turns >= limits.max_turns:
            end_reason = "turn_limit"
            break
        if room <= 0:
            end_reason = "length"
            break
        params = {**base_params, "max_tokens": min(limits.max_tokens_per_turn, room,
                                                   int(base_params.get("max_tokens", room)))}
        try:
            output = await generate(asm.context, params)
        except PolicyError:
            raise
        except Exception as exc:
            raise PolicyError(f"generation failed at turn {turns + 1} of task {task.id}: {exc}") from exc
        token_ids = list(output.token_ids)[:room]
        asm.add_model(token_ids, getattr(output, "log_probs", None))
        counted_tail = counted_tail and not token_ids
        turns += 1
        ended_turn = bool(token_ids) and eos_id is not None and token_ids[-1] == eos_id
        text = tokenizer.decode(token_ids, skip_special_tokens=False)
        parsed = parse_tool_calls(text.removesuffix(IM_END))
        malformed += parsed.n_malformed
        # The agent loop's own step (one thread hop per turn). A reply cut at the token limit shows in the chat
        # markers (the assistant turn is closed for it), so no note is added to the observations here.
        answered = await loop.run_in_executor(None, run_tool_calls, env.step, parsed.calls)
        calls_seen += [(call.name, call.arguments_json()) for call in answered.ran]
        observations += answered.observations
        turn_messages = [Message("assistant", parsed.content, tool_calls=parsed.calls), *answered.messages]
        messages.extend(turn_messages)
        if on_turn is not None:
            on_turn(TurnEvent(turns, text, parsed, tuple(turn_messages), tuple(answered.results)))
        if answered.ended:
            reward, end_reason = answered.reward, answered.end_reason
            break
        obs_ids = tokenizer.encode(_observation_text(chat, answered.observations, ended_turn, tokenizer, limits),
                                   add_special_tokens=False)
        room = limits.response_length - len(asm.ids)
        if len(obs_ids) >= room:
            asm.add_observation(obs_ids[:room])
            end_reason = "length"
            break
        asm.add_observation(obs_ids)
        observation_turns += 1
        counted_tail = True

    if reward is None:
        reward = float(env.final_reward())
    ids, mask, logprobs = end_on_model_token(asm.ids[:limits.response_length], asm.mask[:limits.response_length],
                                             asm.logprobs[:limits.response_length])
    if counted_tail and len(ids) < min(len(asm.ids), limits.response_length):
        observation_turns -= 1  # that observation is no longer in the response
    return TokenEpisode(
        prompt_ids=asm.prompt_ids, response_ids=ids, response_mask=mask,
        response_logprobs=logprobs if asm.have_logprobs else None, reward=reward, assistant_turns=turns,
        observation_turns=observation_turns, malformed_calls=malformed, end_reason=end_reason, messages=messages,
        calls=calls_seen, observations=observations,
    )


def end_on_model_token(ids: Sequence[int], mask: Sequence[int],
                       logprobs: Sequence[float]) -> tuple[list[int], list[int], list[float]]:
    """Drop the observation tokens after the last model token.

    verl puts an episode's reward on its last response token and its GAE skips tokens whose mask is 0, so a
    response that ends on an observation (a turn or length limit reached after a tool answer) would lose its
    reward. The model never acted on those trailing tokens, so nothing is learned from them either way; cutting
    them puts the reward on the final model token, where the TRL path (`cuda_agent.rl.critic.outcome_rewards`)
    puts it too."""
    end = len(mask)
    while end and not mask[end - 1]:
        end -= 1
    return list(ids[:end]), list(mask[:end]), list(logprobs[:end])


def _observation_text(chat: ChatFormat, outputs: list[str], ended_turn: bool, tokenizer: TokenizerLike,
                      limits: RolloutLimits) -> str:
    if limits.max_observation_tokens is not None:
        cut = []
        for out in outputs:
            ids = tokenizer.encode(out, add_special_tokens=False)
            if len(ids) > limits.max_observation_tokens:
                out = tokenizer.decode(ids[: limits.max_observation_tokens]) + "\n[... observation cut to fit the context]"
            cut.append(out)
        outputs = cut
    return chat.render_observation(outputs, close_assistant=not ended_turn)


def _eos_id(tokenizer: TokenizerLike) -> int | None:
    ids = tokenizer.encode(IM_END, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else getattr(tokenizer, "eos_token_id", None)


def tokenize_conversation(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], tokenizer: TokenizerLike,
                          chat: ChatFormat = ChatFormat()) -> tuple[list[int], list[int], list[int]]:
    """Re-tokenize a saved conversation (system, user, then assistant turns and their results) exactly as
    `run_token_episode` lays it out: ``(prompt_ids, response_ids, response_mask)``, assistant tokens masked 1.

    Raises `ValueError` if the conversation does not start with a system and a user message."""
    from cuda_agent.rl.toolparse import format_tool_call

    if len(messages) < 2 or messages[0].role != "system" or messages[1].role != "user":
        raise ValueError("a conversation must start with the system prompt and the task message")
    prompt = tokenizer.encode(chat.render_prompt(messages[0].content, messages[1].content, tools, tokenizer),
                              add_special_tokens=False)
    ids: list[int] = []
    mask: list[int] = []
    pending: list[str] = []
    for message in messages[2:]:
        if message.role == "assistant":
            if pending:
                obs = tokenizer.encode(chat.render_observation(pending, close_assistant=False), add_special_tokens=False)
                ids += obs
                mask += [0] * len(obs)
                pending = []
            text = chat.render_assistant(message.content, [format_tool_call(c) for c in message.tool_calls])
            turn = tokenizer.encode(text, add_special_tokens=False)
            ids += turn
            mask += [1] * len(turn)
        else:
            pending.append(message.content)
    return prompt, ids, mask
