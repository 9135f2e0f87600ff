"""Chat rendering for token-level RL: the prompt, the observation segments between model turns, and a tokenizer
protocol, so that the token assembly is exact and testable without verl or transformers.

The format is ChatML with Hermes tool calls (what Qwen2/Qwen2.5/Qwen3 models use): tool results come back as a
``user`` message of ``<tool_response>`` blocks. Everything the environment adds between two model turns is one
*observation segment*; it is masked out of the loss (``response_mask`` 0).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END, "<tool_call>", "</tool_call>", "<tool_response>",
                                   "</tool_response>")


class TokenizerLike(Protocol):
    """The two calls the assembly needs; a Hugging Face tokenizer satisfies it (``encode`` with
    ``add_special_tokens=False`` is what we call)."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


@dataclass(frozen=True)
class ChatFormat:
    """How prompts and observations are rendered as text.

    Attributes:
        tools_header: the text introducing the tool schemas in the system message (Qwen's wording).
        use_tokenizer_template: render the first prompt with the tokenizer's own ``apply_chat_template`` (for a
            real model whose template differs from plain ChatML); observations stay ChatML/Hermes.
    """

    tools_header: str = (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    )
    tools_footer: str = (
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}"
        "\n</tool_call>"
    )
    use_tokenizer_template: bool = False

    def render_prompt(self, system: str, user: str, tools: Sequence[Mapping[str, Any]] = (),
                      tokenizer: Any | None = None) -> str:
        """The text up to and including the first ``<|im_start|>assistant\\n``."""
        if self.use_tokenizer_template and tokenizer is not None and getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(
                [{"role": "system", "content": system}, {"role": "user", "content": user}],
                tools=list(tools) or None, add_generation_prompt=True, tokenize=False)
        if tools:
            schemas = "\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools)
            system = f"{system}\n\n{self.tools_header}{schemas}{self.tools_footer}"
        return (f"{IM_START}system\n{system}{IM_END}\n{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n")

    def render_observation(self, tool_outputs: Sequence[str], *, close_assistant: bool) -> str:
        """The text after a model turn: (the turn's ``<|im_end|>`` if the model did not emit it), the tool
        responses as one user message, and the next assistant header."""
        body = "\n".join(f"<tool_response>\n{out}\n</tool_response>" for out in tool_outputs)
        head = IM_END if close_assistant else ""
        return f"{head}\n{IM_START}user\n{body}{IM_END}\n{IM_START}assistant\n"

    def render_assistant(self, content: str, tool_calls_text: Sequence[str]) -> str:
        """An assistant turn as the model should write it (content, then the calls, then ``<|im_end|>``)."""
        parts = [content] if content else []
        parts.extend(tool_calls_text)
        return "\n".join(parts) + IM_END


class ByteTokenizer:
    """A tokenizer built locally with no files: one id per UTF-8 byte, plus the ChatML/Hermes special tokens as
    single ids after the 256 bytes. It ships for tests and demos (exact round trips, hand-computable ids)."""

    def __init__(self, special_tokens: Sequence[str] = SPECIAL_TOKENS) -> None:
        self.special_tokens = tuple(special_tokens)
        self._special_ids = {tok: 256 + i for i, tok in enumerate(self.special_tokens)}
        self._by_id = {i: tok for tok, i in self._special_ids.items()}
        self.eos_token = IM_END
        self.eos_token_id = self._special_ids[IM_END]
        self.pad_token_id = self._special_ids[ENDOFTEXT]
        self.chat_template = None

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.special_tokens)

    def token_id(self, token: str) -> int:
        return self._special_ids[token]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = []
        i = 0
        while i < len(text):
            for tok, tok_id in self._special_ids.items():
                if text.startswith(tok, i):
                    ids.append(tok_id)
                    i += len(tok)
                    break
            else:
                j = i + 1
                while j < len(text) and text[j] != "<":
                    j += 1
                ids.extend(text[i:j].encode())
                i = j
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        out = bytearray()
        text: list[str] = []
        for tok_id in ids:
            if tok_id in self._by_id:
                text.append(out.decode(errors="replace"))
                out = bytearray()
                if not skip_special_tokens:
                    text.append(self._by_id[tok_id])
            elif 0 <= tok_id < 256:
                out.append(tok_id)
        text.append(out.decode(errors="replace"))
        return "".join(text)
