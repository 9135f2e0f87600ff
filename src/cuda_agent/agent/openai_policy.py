"""`OpenAIPolicy`: any OpenAI-compatible chat-completions endpoint with tool calling (vLLM, SGLang, hosted APIs).

Requests go through `cuda_agent.llm_client.ChatEndpoint` (the openai SDK, with our retries of transient failures:
HTTP 429 and 5xx, refused or dropped connections, timeouts, honouring ``Retry-After``). This module adds what is the
agent's own: the request (messages, tools), reading tool calls (the server's, or written as text by a model the
server does not parse for), and each call's tokens and cost in the returned turn's `Usage`.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from cuda_agent.agent.toolparse import TOOL_CALL_OPEN, parse_json_tool_calls, parse_tool_calls
from cuda_agent.agent.types import AssistantTurn, Message, ToolCall, Usage
from cuda_agent.errors import ConfigError, PolicyError
from cuda_agent.llm_client import ChatEndpoint, RetryPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenAIConfig:
    """Endpoint settings.

    Attributes:
        base_url: the API root, e.g. http://localhost:8000/v1 (``/chat/completions`` is appended).
        model: the model name the endpoint serves.
        api_key: bearer token; None for endpoints without authentication (a local vLLM).
        temperature: sampling temperature.
        max_completion_tokens: most tokens one reply may have.
        timeout_s: seconds one HTTP request may take.
        max_retries: retries of a transient failure before `PolicyError`.
        backoff_s: first retry delay; doubled each retry (with jitter), capped at ``backoff_max_s``.
        backoff_max_s: longest delay between retries.
        price_prompt: cost of a million prompt tokens (for accounting; 0 when unknown).
        price_completion: cost of a million completion tokens.
        extra_body: more request fields (e.g. ``{"top_p": 0.95}`` or vendor options).
    """

    base_url: str
    model: str
    api_key: str | None = None
    temperature: float = 0.6
    max_completion_tokens: int = 8192
    timeout_s: float = 600.0
    max_retries: int = 6
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    price_prompt: float = 0.0
    price_completion: float = 0.0
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 **overrides: Any) -> "OpenAIConfig":
        """Flags win over ``OPENAI_BASE_URL``, ``CUDA_AGENT_MODEL`` and ``OPENAI_API_KEY``; raise `ConfigError`
        naming what is missing."""
        base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        model = model or os.environ.get("CUDA_AGENT_MODEL")
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        missing = []
        if not base_url:
            missing.append("the endpoint URL (--base-url or OPENAI_BASE_URL, e.g. http://localhost:8000/v1)")
        if not model:
            missing.append("the model name (--model or CUDA_AGENT_MODEL)")
        if missing:
            raise ConfigError(
                "no model endpoint configured: set " + " and ".join(missing)
                + "; add OPENAI_API_KEY (or --api-key) if the endpoint needs a key"
            )
        return cls(base_url=str(base_url).rstrip("/"), model=str(model), api_key=api_key, **overrides)


class OpenAIPolicy:
    """Ask the endpoint for the next turn, offering the environment's tools."""

    def __init__(self, config: OpenAIConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.endpoint = ChatEndpoint(
            config.base_url, config.api_key, timeout_s=config.timeout_s, sleep=sleep,
            retry=RetryPolicy(config.max_retries, config.backoff_s, config.backoff_max_s))
        self.usage = Usage()

    def query(self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]]) -> AssistantTurn:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [m.to_openai() for m in messages],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_completion_tokens,
            **self.config.extra_body,
        }
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = "auto"
        data = self.endpoint.complete(body)
        names = [str((t.get("function") or {}).get("name", "")) for t in tools if isinstance(t, Mapping)]
        turn = self._parse(data, names)
        self.usage = self.usage + turn.usage
        return turn

    def _parse(self, data: Mapping[str, Any], tool_names: Sequence[str] = ()) -> AssistantTurn:
        try:
            choice = data["choices"][0]
            message = choice["message"]
            if not isinstance(message, Mapping):
                raise TypeError(type(message).__name__)
        except (KeyError, IndexError, TypeError) as exc:
            raise PolicyError(f"the endpoint's reply has no choices[0].message: {str(data)[:500]}") from exc
        calls = []
        for index, raw in enumerate(message.get("tool_calls") or ()):
            call = ToolCall.from_openai(raw if isinstance(raw, Mapping) else {})
            calls.append(call if call.id else ToolCall(call.name, call.arguments, f"call_{index}"))
        content = message.get("content")
        content = content if isinstance(content, str) else ""
        if not calls and content:
            # The server did not parse tool calls (llama.cpp's Python server with the model's own template, a plain
            # completion server): read the Hermes/Qwen <tool_call> blocks from the text, or, as small models often
            # write them, ```json {"name": ..., "arguments": ...}``` blocks. A block that is not valid JSON still
            # becomes a call, which the environment answers with an error observation.
            parsed = (parse_tool_calls(content) if TOOL_CALL_OPEN in content
                      else parse_json_tool_calls(content, tool_names))
            content, calls = parsed.content, list(parsed.calls)
            if parsed.malformed:
                log.info("%d of %d tool-call blocks in the reply are malformed", parsed.n_malformed, len(calls))
        finish = choice.get("finish_reason") if isinstance(choice, Mapping) else None
        usage_data = data.get("usage") or {}
        prompt = int(usage_data.get("prompt_tokens") or 0)
        completion = int(usage_data.get("completion_tokens") or 0)
        cost = (prompt * self.config.price_prompt + completion * self.config.price_completion) / 1e6
        return AssistantTurn(content, tuple(calls), Usage(prompt, completion, cost, 1), str(finish or ""))
