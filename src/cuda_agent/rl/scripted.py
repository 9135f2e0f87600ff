"""`ScriptedGenerationServer`: a stand-in for verl's generation server that replays scripted model turns.

It ships for tests and demos: it answers ``generate(request_id, *, prompt_ids, sampling_params, ...)`` like verl's
server manager, returning scripted token ids. Each new ``request_id`` (one trajectory) takes the next script; each
call on that request returns the script's next turn (text, encoded with the tokenizer, or a list of token ids).
Every call is recorded, so a test can check what context the model was given.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

from cuda_agent.errors import PolicyError
from cuda_agent.rl.chat import TokenizerLike

Turn = str | Sequence[int]


@dataclass
class ScriptedOutput:
    """Mirrors verl's ``TokenOutput`` fields that agent loops read."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    routed_experts: Any = None
    stop_reason: str | None = "completed"
    num_preempted: int | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenerateCall:
    request_id: str
    prompt_ids: list[int]
    sampling_params: dict[str, Any]


class ScriptedGenerationServer:
    """Replays ``scripts`` (one list of turns per trajectory). ``logprob`` is reported for every token when not
    None, so that log-probability alignment can be checked too."""

    def __init__(self, scripts: Sequence[Sequence[Turn]], tokenizer: TokenizerLike, *, logprob: float | None = None):
        self.scripts = [list(s) for s in scripts]
        self.tokenizer = tokenizer
        self.logprob = logprob
        self.calls: list[GenerateCall] = []
        self._assigned: dict[str, int] = {}
        self._position: dict[str, int] = {}
        self._lock = asyncio.Lock()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> ScriptedOutput:
        """The next scripted turn of this request's script. Raises `PolicyError` when the scripts are spent."""
        async with self._lock:
            if request_id not in self._assigned:
                if len(self._assigned) >= len(self.scripts):
                    raise PolicyError(f"scripted server: no script left for request {request_id} "
                                      f"({len(self.scripts)} scripts, all assigned)")
                self._assigned[request_id] = len(self._assigned)
                self._position[request_id] = 0
            script = self.scripts[self._assigned[request_id]]
            position = self._position[request_id]
            if position >= len(script):
                raise PolicyError(f"scripted server: script {self._assigned[request_id]} has only {len(script)} turns")
            self._position[request_id] = position + 1
            self.calls.append(GenerateCall(request_id, list(prompt_ids), dict(sampling_params)))
        turn = script[position]
        ids = self.tokenizer.encode(turn, add_special_tokens=False) if isinstance(turn, str) else list(turn)
        limit = sampling_params.get("max_tokens")
        if isinstance(limit, int):
            ids = ids[:limit]
        logprobs = None if self.logprob is None else [self.logprob] * len(ids)
        return ScriptedOutput(token_ids=ids, log_probs=logprobs)

    def as_generate_fn(self, request_id: str):
        """A `GenerateFn` bound to one request id (what `run_token_episode` takes)."""

        async def generate(context: list[int], params: dict[str, Any]) -> ScriptedOutput:
            return await self.generate(request_id, prompt_ids=context, sampling_params=params)

        return generate
