"""`ChatEndpoint`: the one client of OpenAI-compatible chat-completions endpoints (vLLM, SGLang, llama.cpp, hosted
APIs), used by the agent's policy (`cuda_agent.agent.openai_policy`) and the task composer (`cuda_agent.synth.llm`).

Requests go through the ``openai`` SDK, imported here on first use only, so that ``import cuda_agent`` and the
evaluator never need it. The SDK's own retries are off: ours retry transient failures (HTTP 408/409/429/5xx, dropped
connections, timeouts, a reply that is not JSON) with exponential backoff and jitter, honour ``Retry-After``, take an
injectable ``sleep`` (tests run without waiting) and say how many attempts were made when they give up. An endpoint
that has never answered and refuses the connection (nothing listens there) or whose host name does not exist is a
`PolicyError` at once: that is a wrong address, and a minute of retries would only hide it. Once it has answered,
a refused connection is retried like any other (a server restarting). A 400 that says the prompt does not fit is a `ContextOverflowError` (the agent condenses and asks again);
other client errors are a `PolicyError` at once, since asking again cannot help.
"""
from __future__ import annotations

import logging
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from cuda_agent.errors import ContextOverflowError, PolicyError

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
# How servers word "the prompt does not fit": vLLM/OpenAI ("maximum context length"), llama.cpp ("exceed context
# window", "exceeds the available context size"), others.
OVERFLOW_HINTS = ("context length", "context_length", "maximum context", "too many tokens", "prompt is too long",
                  "context window", "context size", "n_ctx")
NO_KEY = "no-key"
"""Sent as the key to endpoints that need none (a local vLLM ignores it; the SDK refuses an empty key)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to ask again: ``max_retries`` retries, the first after ``backoff_s`` (doubled
    each time, with jitter, capped at ``backoff_max_s``), never sooner than the server's ``Retry-After``."""

    max_retries: int = 6
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.backoff_max_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
        return max(delay, retry_after or 0.0)


@dataclass
class ChatEndpoint:
    """One endpoint: ``base_url`` is the API root (``http://host:8000/v1``); ``api_key`` None or empty for one
    without authentication; ``timeout_s`` bounds one request."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 600.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], None] = time.sleep
    _client: Any = field(default=None, init=False, repr=False)
    _answered: bool = field(default=False, init=False, repr=False)

    def client(self) -> Any:
        """The SDK client (made on first use)."""
        if self._client is None:
            import openai

            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or NO_KEY, max_retries=0,
                                         timeout=self.timeout_s)
        return self._client

    def complete(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``request`` (chat-completions fields: model, messages, tools, ...; fields the SDK does not name go
        in the body as they are) and return the reply as plain JSON data. Raises `ContextOverflowError` or
        `PolicyError` as the module says."""
        import openai

        fields = dict(request)
        known = {"model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "top_p", "stop", "seed"}
        extra = {k: fields.pop(k) for k in list(fields) if k not in known}
        where = f"{self.base_url}/chat/completions"
        last_error = ""
        for attempt in range(self.retry.max_retries + 1):
            retry_after: float | None = None
            try:
                reply = self.client().chat.completions.create(**fields, extra_body=extra or None)
                self._answered = True
                return reply.model_dump(mode="json", exclude_unset=True)
            except openai.APIStatusError as exc:
                text = exc.response.text[:2000]
                if exc.status_code == 400 and any(h in text.lower() for h in OVERFLOW_HINTS):
                    raise ContextOverflowError(f"{where}: the conversation is longer than the model's context: "
                                               f"{text}") from exc
                if exc.status_code not in RETRY_STATUS:
                    raise PolicyError(f"{where}: HTTP {exc.status_code}: {text}; check the model name, key and "
                                      "request") from exc
                last_error = f"HTTP {exc.status_code}: {text[:300]}"
                retry_after = _seconds(exc.response.headers.get("retry-after"))
            except openai.APIConnectionError as exc:  # refused, dropped, timed out
                last_error = f"{type(exc).__name__}: {exc.__cause__ or exc}"
                unreachable = _unreachable(exc)
                if unreachable and not self._answered:
                    raise PolicyError(f"{where}: {unreachable}; check the address (--base-url or OPENAI_BASE_URL) "
                                      "and that the server is running") from exc
            except (openai.APIResponseValidationError, ValueError) as exc:
                last_error = f"reply is not JSON: {exc}"
            if attempt == self.retry.max_retries:
                break
            delay = self.retry.delay(attempt, retry_after)
            log.warning("model endpoint: %s; retry %d/%d in %.1f s", last_error, attempt + 1, self.retry.max_retries,
                        delay)
            self.sleep(delay)
        raise PolicyError(
            f"{where}: gave up after {self.retry.max_retries + 1} attempts; last error: {last_error}. "
            "Check that the server is up (OPENAI_BASE_URL) and not overloaded."
        )


def _unreachable(exc: BaseException) -> str | None:
    """What makes the address wrong rather than the server busy: a refused connection (nothing listens there) or a
    host name that does not exist; None for anything else (a timeout, a dropped connection, a DNS hiccup)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused (nothing listens there)"
        if isinstance(current, socket.gaierror) and current.errno != socket.EAI_AGAIN:
            return f"the host name does not resolve ({current.strerror})"
        current = current.__cause__ or current.__context__
    return None


def _seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
