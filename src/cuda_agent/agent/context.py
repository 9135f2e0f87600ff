"""Context management: when the conversation outgrows the model's window, condense it.

The full conversation is always kept (in memory and in the trajectory); what the policy sees is a condensed copy:
the system prompt, the task, and the most recent turns verbatim; older tool outputs shortened to a head with a
note; if that is still too long, the oldest turns dropped whole (an assistant message with its tool results, so
tool-call pairing stays valid) and replaced by one note.
"""
from __future__ import annotations

from typing import Sequence

from cuda_agent.agent.config import AgentConfig
from cuda_agent.agent.policy import estimate_message_tokens
from cuda_agent.agent.types import Message


def _groups(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Split into the head (everything before the first assistant message) and turn groups."""
    head: list[Message] = []
    groups: list[list[Message]] = []
    for message in messages:
        if message.role == "assistant":
            groups.append([message])
        elif groups:
            groups[-1].append(message)
        else:
            head.append(message)
    return head, groups


def condense(messages: Sequence[Message], config: AgentConfig, *, force: bool = False) -> list[Message]:
    """What the policy should see: ``messages`` unchanged when they fit in ``condense_at`` of the window (and not
    ``force``), else condensed as described above."""
    limit = int(config.context_tokens * config.condense_at)
    if not force and estimate_message_tokens(messages) <= limit:
        return list(messages)
    head, groups = _groups(messages)
    keep = max(1, config.keep_recent if not force else min(config.keep_recent, 2))
    old, recent = groups[:-keep], groups[-keep:]
    shortened = [[_shorten(m, config.condensed_chars) for m in group] for group in old]
    result = head + [m for g in shortened for m in g] + [m for g in recent for m in g]
    dropped = 0
    while shortened and estimate_message_tokens(result) > limit:
        shortened.pop(0)
        dropped += 1
        note = [Message("user", f"[{dropped} earlier turns were omitted to fit the context window; the workspace "
                                "files hold their results: read them again if needed]")]
        result = head + note + [m for g in shortened for m in g] + [m for g in recent for m in g]
    return result


def _shorten(message: Message, chars: int) -> Message:
    if message.role not in ("tool", "user") or len(message.content) <= chars:
        return message
    note = f"\n[condensed: {len(message.content) - chars} more characters of this old output were dropped]"
    return Message(message.role, message.content[:chars] + note, message.tool_calls, message.tool_call_id, message.name)
