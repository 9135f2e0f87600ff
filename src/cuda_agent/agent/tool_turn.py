"""Answer one assistant turn: run its tool calls in the environment, in order, until one ends the episode.

This is the step both loops take, the agent's (`cuda_agent.agent.loop.Agent.step`, over chat messages) and the
trainer's (`cuda_agent.rl.rollout.run_token_episode`, over tokens), so a turn means the same thing in an evaluation
run and in training: a turn without tool calls is answered once, as a user message (the environment's nudge); each
call is answered by a tool message; the calls after the one that ended the episode are answered "not run", so every
tool call in the conversation has its answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from cuda_agent.agent.step_info import StepInfo
from cuda_agent.agent.types import Message, ToolCall

EnvStep = Callable[[ToolCall], tuple[str, float, bool, bool, StepInfo]]
ResultCallback = Callable[[StepInfo], None]

CUT_OFF_NOTE = ("\n[your reply hit the completion-token limit and was cut off{where}; write shorter replies: less "
                "prose, one file or one edit per call]")
NOT_RUN = "not run: the episode ended"


@dataclass
class ToolTurn:
    """What the environment answered to one assistant turn.

    ``messages``: the answers in conversation order (tool messages, or one user message for a turn without calls).
    ``ran``: the calls that ran (an empty `ToolCall` for a turn without calls); ``results``: one trajectory record
    for each (tool_call_id, observation, reward, terminated, truncated, and the `StepInfo` as its dict); ``infos``:
    the same steps' `StepInfo` values.
    ``ended``: a call ended the episode; ``reward`` and ``end_reason`` are then that call's.
    """

    messages: list[Message] = field(default_factory=list)
    ran: list[ToolCall] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    infos: list[StepInfo] = field(default_factory=list)
    ended: bool = False
    reward: float | None = None
    end_reason: str = ""

    @property
    def observations(self) -> list[str]:
        return [r["observation"] for r in self.results]


def run_tool_calls(step: EnvStep, calls: Sequence[ToolCall], *, cut_off: bool = False,
                   on_result: ResultCallback | None = None) -> ToolTurn:
    """Run ``calls`` (an assistant turn's tool calls; none is one step with an empty call) through ``step`` (an
    `AgentEnv.step`). ``cut_off``: the reply hit the completion-token limit; each observation then says so, so the
    model learns to write shorter replies. ``on_result`` sees each step's `StepInfo` as it is made (progress)."""
    turn = ToolTurn()
    planned: tuple[ToolCall | None, ...] = tuple(calls) or (None,)
    for index, call in enumerate(planned):
        turn.ran.append(call or ToolCall(""))
        observation, reward, terminated, truncated, info = step(turn.ran[-1])
        if cut_off:
            observation += CUT_OFF_NOTE.format(where=" before any tool call" if call is None else "")
        if call is None:
            turn.messages.append(Message("user", observation))
        else:
            turn.messages.append(Message("tool", observation, tool_call_id=call.id, name=call.name))
        record = {"tool_call_id": call.id if call else "", "observation": observation, "reward": reward,
                  "terminated": terminated, "truncated": truncated, "info": info.to_dict()}
        turn.results.append(record)
        turn.infos.append(info)
        if on_result is not None:
            on_result(info)
        if terminated or truncated:
            turn.ended, turn.reward = True, float(reward)
            turn.end_reason = info.end.reason if info.end is not None else "ended"
            turn.messages += [Message("tool", NOT_RUN, tool_call_id=skipped.id, name=skipped.name)
                              for skipped in planned[index + 1:] if skipped is not None]
            break
    return turn
