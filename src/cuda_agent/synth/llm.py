"""The LLM composer: an LLM fuses 2-5 catalog operators, chosen by seed, into one KernelBench-format task.

The chat client is a small protocol (`ChatClient`): `OpenAIChatClient` speaks the OpenAI-compatible chat-completions
API through the project's one client (`cuda_agent.llm_client.ChatEndpoint`: the openai SDK and our retries);
`ScriptedChatClient` replays fixed replies (offline runs, tests, and replaying a
recorded synthesis). transformers modules are never given to the LLM: they stay standalone tasks, written by the
rule-based code generator.
"""
from __future__ import annotations

import logging
import os
import random
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, Sequence

from cuda_agent.errors import ConfigError, PolicyError
from cuda_agent.llm_client import ChatEndpoint, RetryPolicy
from cuda_agent.synth.compose import DEFAULT_WEIGHTS, Composed, RuleComposer
from cuda_agent.synth.spec import Catalog, OperatorSpec

log = logging.getLogger(__name__)

Message = dict[str, str]


class ChatClient(Protocol):
    """Returns the assistant's reply text to a list of chat messages; raises `PolicyError` when it cannot."""

    def chat(self, messages: Sequence[Message]) -> str: ...


@dataclass(frozen=True)
class OpenAIChatClient:
    """An OpenAI-compatible chat-completions endpoint (vLLM, SGLang, a hosted API).

    ``base_url`` is the API root (``http://host:8000/v1``); ``api_key`` may be empty for local servers. Transient
    failures are retried (`cuda_agent.llm_client`), up to ``max_retries`` times.
    """

    base_url: str
    model: str
    api_key: str = ""
    temperature: float = 0.8
    max_tokens: int = 2048
    timeout_s: float = 120.0
    max_retries: int = 3

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None) -> "OpenAIChatClient":
        """Settings from arguments, else ``CUDA_AGENT_BASE_URL``/``OPENAI_BASE_URL``, ``CUDA_AGENT_MODEL``, and
        ``CUDA_AGENT_API_KEY``/``OPENAI_API_KEY``; raises `ConfigError` naming what is missing."""
        url = base_url or os.environ.get("CUDA_AGENT_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        name = model or os.environ.get("CUDA_AGENT_MODEL")
        if not url or not name:
            raise ConfigError(
                "the LLM composer needs an OpenAI-compatible endpoint: pass --base-url and --model "
                "(or set CUDA_AGENT_BASE_URL and CUDA_AGENT_MODEL); or use --composer rule"
            )
        key = os.environ.get("CUDA_AGENT_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
        return cls(base_url=url.rstrip("/"), model=name, api_key=key)

    @cached_property
    def endpoint(self) -> ChatEndpoint:
        return ChatEndpoint(self.base_url, self.api_key, timeout_s=self.timeout_s,
                            retry=RetryPolicy(max_retries=self.max_retries))

    def chat(self, messages: Sequence[Message]) -> str:
        data = self.endpoint.complete({"model": self.model, "messages": list(messages),
                                       "temperature": self.temperature, "max_tokens": self.max_tokens})
        try:
            return str(data["choices"][0]["message"].get("content") or "")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise PolicyError(f"chat reply from {self.base_url} has no choices[0].message: {str(data)[:300]}") from exc


class ScriptedChatClient:
    """Replays ``replies`` in order (then the last one again): a stand-in endpoint for offline runs and tests."""

    def __init__(self, replies: Sequence[str]) -> None:
        if not replies:
            raise ConfigError("a scripted chat client needs at least one reply")
        self.replies = list(replies)
        self.calls: list[list[Message]] = []

    def chat(self, messages: Sequence[Message]) -> str:
        self.calls.append(list(messages))
        return self.replies[min(len(self.calls) - 1, len(self.replies) - 1)]


SYSTEM_PROMPT = """You write PyTorch reference programs for a GPU-kernel benchmark. Each program is one Python file in \
KernelBench format:
- imports (torch, torch.nn as nn, torch.nn.functional as F), then `class Model(nn.Module)` whose `__init__` takes \
the sizes and hyper-parameters it needs and whose `forward` computes the result;
- module-level size constants, one per line as `name = <int>` (the first is `batch_size`);
- `def get_inputs()` returning a list of input tensors built from those constants (torch.randn or torch.rand);
- `def get_init_inputs()` returning the list of arguments for `Model(...)`.
Rules: deterministic (no dropout, no random numbers in forward); every operator must change the values meaningfully \
(no identity chains, no outputs that are constant or all zero); the output keeps the batch dimension; sizes such \
that one forward pass on an H100 takes about 1-10 ms. Answer with one ```python code block and nothing else."""


def _describe(spec: OperatorSpec) -> str:
    example = ""
    if spec.example is not None:
        example = f" (verified: input {list(spec.example[0][0])} -> output {list(spec.example[1])})"
    args = ", ".join(a.name for a in (spec.init_args if spec.kind == "module" else spec.call_args))
    call = f"{spec.name}({args})" if args else spec.name
    return f"- {call}: {spec.kind}, {spec.category}{example}"


def build_prompt(specs: Sequence[OperatorSpec]) -> list[Message]:
    """The chat messages asking to fuse ``specs`` in order into one task."""
    listing = "\n".join(_describe(s) for s in specs)
    user = (f"Write one program whose forward applies these {len(specs)} operators in this order (add the reshapes "
            f"or reductions needed to make shapes fit, and choose sizes):\n{listing}")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)


def extract_code(reply: str) -> str | None:
    """The python code block of a reply (the longest, if several); the whole reply if it is bare code."""
    blocks = _BLOCK.findall(reply)
    if blocks:
        return max(blocks, key=len).strip() + "\n"
    return reply.strip() + "\n" if "class Model" in reply else None


class LLMComposer:
    """Compose candidates by asking an LLM; which operators each candidate stacks is fixed by the seed."""

    name = "llm"

    def __init__(self, catalog: Catalog, client: ChatClient, seed: int = 0, min_ops: int = 2, max_ops: int = 5,
                 standalone_probability: float = 0.08) -> None:
        self.client = client
        self.seed = seed
        self.min_ops, self.max_ops = min_ops, max_ops
        self.by_category: dict[str, list[OperatorSpec]] = {}
        for spec in catalog.composable():
            if spec.source != "transformers":
                self.by_category.setdefault(spec.category, []).append(spec)
        if not self.by_category:
            raise ConfigError("the catalog has no composable torch operators; crawl torch first")
        self.standalone_probability = standalone_probability
        self._standalone = RuleComposer(catalog, seed=seed) if catalog.standalone() else None

    def pick(self, index: int) -> list[OperatorSpec]:
        """The operators candidate ``index`` stacks (deterministic for a seed)."""
        rng = random.Random(f"llm:{self.seed}:{index}")
        categories = list(self.by_category)
        weights = [DEFAULT_WEIGHTS.get(c, 0.5) for c in categories]
        k = rng.randint(self.min_ops, self.max_ops)
        return [rng.choice(self.by_category[rng.choices(categories, weights=weights)[0]]) for _ in range(k)]

    def compose(self, index: int) -> Composed | None:
        rng = random.Random(f"llm-standalone:{self.seed}:{index}")
        if self._standalone is not None and rng.random() < self.standalone_probability:
            draft = self._standalone._standalone(rng)
            if draft is not None:
                from cuda_agent.synth.codegen import render

                return Composed(index=index, code=render(draft), ops=draft.ops, composer=self.name)
        specs = self.pick(index)
        reply = self.client.chat(build_prompt(specs))
        code = extract_code(reply)
        if code is None:
            log.info("candidate %d: the reply holds no code block", index)
            return None
        return Composed(index=index, code=code, ops=tuple(s.name for s in specs), composer=self.name)
