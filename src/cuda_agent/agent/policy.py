"""Policies: what produces the next assistant turn. `Policy` is the protocol; `ScriptedPolicy` replays a fixed
list of tool calls (it ships for tests and demos); `OpenAIPolicy` (in `openai_policy`) calls a model endpoint."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from cuda_agent.agent.types import AssistantTurn, Message, ToolCall, Usage
from cuda_agent.errors import ConfigError, PolicyError


class Policy(Protocol):
    """Given the conversation so far and the tool schemas, return the next assistant turn.

    Raises `PolicyError` when no turn can be produced (the endpoint failed after its retries, a script ran out).
    """

    def query(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> AssistantTurn: ...


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token): enough for budgets and for deciding when to condense."""
    return (len(text) + 3) // 4


def estimate_message_tokens(messages: Sequence[Message]) -> int:
    total = 0
    for message in messages:
        total += 4 + estimate_tokens(message.content)
        for call in message.tool_calls:
            total += estimate_tokens(call.name) + estimate_tokens(call.arguments_json())
    return total


@dataclass(frozen=True)
class ScriptedPolicy:
    """Replays ``turns`` in order: turn *n* is answered to the conversation's *n*-th assistant slot, so a resumed
    conversation picks up where the script left off. Usage is estimated from the text (4 characters a token), so
    token budgets behave as with a model. When the script is spent it raises `PolicyError`."""

    turns: tuple[AssistantTurn, ...]

    @classmethod
    def from_steps(cls, steps: Sequence[Any], base_dir: Path | None = None) -> "ScriptedPolicy":
        """Steps: a tool call ``{"name", "arguments"}`` (arguments an object, or a raw string sent as is, e.g.
        malformed JSON), a turn ``{"content", "tool_calls": [...]}``, or a plain string (a turn with no tool call).
        An argument value ``{"$file": "x.cu"}`` is replaced by that file's text (relative to ``base_dir``)."""
        turns = []
        for number, step in enumerate(steps, start=1):
            try:
                turns.append(_turn_from_step(step, base_dir, number))
            except (KeyError, TypeError, OSError) as exc:
                raise ConfigError(f"script step {number}: {exc}; see ScriptedPolicy.from_steps for the format") from exc
        return cls(tuple(turns))

    @classmethod
    def from_file(cls, path: str | Path) -> "ScriptedPolicy":
        """Load a script from JSON or YAML (a list of steps, or ``{"steps": [...]}``); raise `ConfigError`."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the script: {exc.strerror or exc}") from exc
        try:
            if path.suffix in (".yaml", ".yml"):
                import yaml  # optional: only YAML scripts need it

                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except ImportError as exc:
            raise ConfigError(f"{path}: YAML scripts need PyYAML (pip install pyyaml), or write the script as JSON") from exc
        except Exception as exc:
            raise ConfigError(f"{path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from exc
        steps = data.get("steps") if isinstance(data, dict) else data
        if not isinstance(steps, list):
            raise ConfigError(f"{path}: a script is a list of steps (or an object with a 'steps' list)")
        return cls.from_steps(steps, base_dir=path.parent)

    def query(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> AssistantTurn:
        index = sum(1 for m in messages if m.role == "assistant")
        if index >= len(self.turns):
            raise PolicyError(f"scripted policy: the script has {len(self.turns)} turns and all were played")
        turn = self.turns[index]
        completion = estimate_tokens(turn.content) + sum(
            estimate_tokens(c.name) + estimate_tokens(c.arguments_json()) for c in turn.tool_calls
        )
        usage = Usage(prompt_tokens=estimate_message_tokens(messages), completion_tokens=completion, calls=1)
        calls = tuple(
            ToolCall(c.name, c.arguments, c.id or f"call_{index}_{i}") for i, c in enumerate(turn.tool_calls)
        )
        return AssistantTurn(turn.content, calls, usage)


def _resolve_files(value: Any, base_dir: Path | None) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$file"}:
            return ((base_dir or Path.cwd()) / str(value["$file"])).read_text()
        return {k: _resolve_files(v, base_dir) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_files(v, base_dir) for v in value]
    return value


def _call_from(data: Mapping[str, Any], base_dir: Path | None) -> ToolCall:
    arguments = data.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = _resolve_files(arguments, base_dir)
        if not isinstance(arguments, Mapping):
            arguments = json.dumps(arguments)
    return ToolCall(str(data["name"]), arguments, str(data.get("id", "")))


def _turn_from_step(step: Any, base_dir: Path | None, number: int) -> AssistantTurn:
    if isinstance(step, str):
        return AssistantTurn(content=step)
    if not isinstance(step, Mapping):
        raise TypeError(f"expected an object or a string, got {type(step).__name__}")
    if "tool_calls" in step:
        calls = tuple(_call_from(c, base_dir) for c in step["tool_calls"])
        return AssistantTurn(str(step.get("content", "")), calls)
    return AssistantTurn(str(step.get("content", "")), (_call_from(step, base_dir),))
