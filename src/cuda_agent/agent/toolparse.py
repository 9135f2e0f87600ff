"""Parse Hermes/Qwen-style tool calls out of generated text.

A policy trained with verl or TRL produces raw text, and so do OpenAI-compatible servers that do not parse tool
calls themselves (llama.cpp's Python server with the model's own chat template): tool calls are JSON objects between
``<tool_call>`` and ``</tool_call>``: ``<tool_call>{"name": "write", "arguments": {"path": "kernels/k.cu", ...}}</tool_call>``.
Parsing never raises: a block that is not a JSON object with a ``name`` becomes a `ToolCall` the environment
rejects with an error observation (and the call is counted as malformed, which the RFT filter reads).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Collection

from cuda_agent.agent.types import ToolCall

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.DOTALL)


@dataclass(frozen=True)
class ParsedTurn:
    """The text outside tool-call blocks, the calls in order, and the indices of the malformed ones."""

    content: str
    calls: tuple[ToolCall, ...]
    malformed: tuple[int, ...] = ()

    @property
    def n_malformed(self) -> int:
        return len(self.malformed)


def parse_tool_calls(text: str) -> ParsedTurn:
    """Split ``text`` into content and tool calls.

    A block whose body is not a JSON object with a string ``name`` is kept as a call named after whatever name can
    be recovered (or ``""``) with the raw body as its arguments, so the environment answers it with an error
    observation that quotes what was wrong. An unclosed last block counts as malformed.
    """
    calls: list[ToolCall] = []
    malformed: list[int] = []
    for index, match in enumerate(_BLOCK.finditer(text)):
        body = match.group(1).strip()
        closed = match.group(0).endswith(TOOL_CALL_CLOSE)
        call = _parse_block(body, index)
        if call is None or not closed:
            malformed.append(index)
            call = call or ToolCall(name=_guess_name(body), arguments=body, id=f"call_{index}")
        calls.append(call)
    content = _BLOCK.sub("", text).strip()
    return ParsedTurn(content=content, calls=tuple(calls), malformed=tuple(malformed))


_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL | re.IGNORECASE)
_LOOKS_LIKE_CALL = (re.compile(r'"name"\s*:'), re.compile(r'"(?:arguments|parameters)"\s*:'))


_CALL_KEYS = frozenset({"name", "arguments", "parameters"})


def parse_json_tool_calls(text: str, tool_names: Collection[str] = ()) -> ParsedTurn:
    """Tool calls a small model writes as plain JSON instead of ``<tool_call>`` blocks: a ```json fence (or the
    whole reply) holding ``{"name": ..., "arguments": {...}}`` (``arguments`` may be missing for a tool without any).

    A JSON object whose keys are ``name`` (a string) and ``arguments`` / ``parameters`` counts; so does one that names
    a tool in ``tool_names`` with its arguments beside the name (``{"name": "profile", "breakdown": true}``); a block
    may hold several such objects one after another. Code and other JSON in a reply are left alone. A body that is not valid JSON (cut off, a trailing comma) but has both
    a ``"name"`` and an ``"arguments"`` key becomes a malformed call, answered by the environment with an error.
    """
    candidates = [(m.span(), m.group(1).strip(), m.group(0).rstrip().endswith("```") and len(m.group(0)) > 3)
                  for m in _FENCE.finditer(text)]
    if not candidates and text.strip().startswith("{"):
        candidates = [((0, len(text)), text.strip(), True)]
    calls: list[ToolCall] = []
    malformed: list[int] = []
    spans: list[tuple[int, int]] = []
    for span, body, closed in candidates:
        if not body.startswith("{"):
            continue
        values = _json_objects(body)
        found: list[ToolCall] = []
        for value in values or ():
            name = value.get("name")
            index = len(calls) + len(found)
            if isinstance(name, str) and set(value) <= _CALL_KEYS:
                call = _parse_block(json.dumps(value), index)
            elif isinstance(name, str) and name in tool_names:
                call = ToolCall(name=name, arguments={k: v for k, v in value.items() if k != "name"},
                                id=f"call_{index}")
            else:
                call = None
            if call is not None:
                found.append(call)
        if values is not None:
            if not found:
                continue
            if not closed:
                malformed.append(len(calls) + len(found) - 1)
        elif all(p.search(body) for p in _LOOKS_LIKE_CALL):
            malformed.append(len(calls))
            found = [ToolCall(name=_guess_name(body), arguments=body, id=f"call_{len(calls)}")]
        else:
            continue
        calls.extend(found)
        spans.append(span)
    content = text
    for start, end in reversed(spans):
        content = content[:start] + content[end:]
    return ParsedTurn(content=content.strip(), calls=tuple(calls), malformed=tuple(malformed))


def _json_objects(body: str) -> list[dict] | None:
    """The JSON objects ``body`` holds one after another (a model often puts several calls in one block, one a
    line); None when any part is not a JSON object."""
    decoder = json.JSONDecoder()
    values: list[dict] = []
    index = 0
    while index < len(body):
        try:
            value, index = decoder.raw_decode(body, index)
        except json.JSONDecodeError:
            return None
        if not isinstance(value, dict):
            return None
        values.append(value)
        while index < len(body) and body[index] in " \t\r\n,":
            index += 1
    return values


def format_tool_call(call: ToolCall) -> str:
    """The canonical text of a call, as a Qwen/Hermes chat template renders it (used to script policies)."""
    try:
        arguments = call.parsed_arguments()
    except ValueError:
        arguments = call.arguments_json()  # type: ignore[assignment]
    body = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def _parse_block(body: str, index: int) -> ToolCall | None:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, dict):
        return ToolCall(name=value["name"], arguments=arguments, id=f"call_{index}")
    if isinstance(arguments, str):
        return ToolCall(name=value["name"], arguments=arguments, id=f"call_{index}")
    return ToolCall(name=value["name"], arguments=json.dumps(arguments), id=f"call_{index}")


def _guess_name(body: str) -> str:
    match = re.search(r'"name"\s*:\s*"([A-Za-z_][A-Za-z0-9_]*)"', body)
    return match.group(1) if match else ""
