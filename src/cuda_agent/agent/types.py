"""Typed messages, tool calls and policy turns: the shapes that pass between policy, loop and environment.

The wire format is OpenAI's chat-completions format (what vLLM, SGLang and hosted APIs speak); these classes convert
to and from it at the edges so that the rest of the package never handles untyped dicts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

Role = Literal["system", "user", "assistant", "tool"]


class ToolArgumentError(ValueError):
    """A tool call's arguments are not a JSON object (malformed JSON, a list, a number...)."""


@dataclass(frozen=True)
class ToolCall:
    """One parsed tool call: the tool's name and its arguments (a JSON string as sent by the model, or a dict).

    Arguments stay as received so that a malformed call can be reported back to the agent verbatim.
    """

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str = ""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raise `ToolArgumentError` saying what is wrong with them."""
        if isinstance(self.arguments, Mapping):
            return dict(self.arguments)
        text = self.arguments.strip() if isinstance(self.arguments, str) else ""
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ToolArgumentError(
                f"arguments of {self.name!r} are not valid JSON ({exc.msg} at char {exc.pos}); "
                "send a JSON object such as {\"path\": \"kernels/k.cu\"}"
            ) from exc
        if not isinstance(value, dict):
            raise ToolArgumentError(f"arguments of {self.name!r} must be a JSON object, got {type(value).__name__}")
        return value

    def arguments_json(self) -> str:
        if isinstance(self.arguments, Mapping):
            return json.dumps(dict(self.arguments))
        return str(self.arguments)

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments_json()}}

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> "ToolCall":
        function = data.get("function") or {}
        arguments = function.get("arguments", "{}")
        if arguments is None:
            arguments = "{}"
        if not isinstance(arguments, (str, Mapping)):
            arguments = json.dumps(arguments)
        return cls(name=str(function.get("name") or ""), arguments=arguments, id=str(data.get("id") or ""))


@dataclass(frozen=True)
class Message:
    """One chat message. ``tool_calls`` only on assistant messages; ``tool_call_id`` only on tool messages."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            if self.name:
                out["name"] = self.name
        return out

    @classmethod
    def from_openai(cls, data: Mapping[str, Any]) -> "Message":
        calls = tuple(ToolCall.from_openai(c) for c in data.get("tool_calls") or ())
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=calls,
            tool_call_id=str(data.get("tool_call_id") or ""),
            name=str(data.get("name") or ""),
        )


@dataclass(frozen=True)
class Usage:
    """Token and cost accounting of one or more model calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost + other.cost,
            self.calls + other.calls,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "calls": self.calls,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Usage":
        return cls(
            int(data.get("prompt_tokens", 0)),
            int(data.get("completion_tokens", 0)),
            float(data.get("cost", 0.0)),
            int(data.get("calls", 0)),
        )


@dataclass(frozen=True)
class AssistantTurn:
    """What a policy returns for one turn: optional text and zero or more tool calls.

    ``finish_reason`` is the endpoint's (``stop``, ``tool_calls``, ``length`` when the reply hit the completion
    limit; empty when unknown).
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""

    def to_message(self) -> Message:
        return Message(role="assistant", content=self.content, tool_calls=self.tool_calls)
