"""Configuration of the environment and of the agent loop: frozen dataclasses, one docstring line per field."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

TRAIN_MAX_TURNS = 150
EVAL_MAX_TURNS = 200

SandboxMode = Literal["auto", "bwrap", "local"]
VerifyMode = Literal["auto", "gpu", "skip"]


@dataclass(frozen=True)
class EnvConfig:
    """How one episode's environment behaves.

    Attributes:
        max_turns: tool calls allowed before the episode is truncated (150 in training, 200 in evaluation).
        max_tokens: model tokens (prompt + completion, summed over turns) allowed; None means no token budget.
        max_wall_s: wall-clock seconds from reset before the episode is truncated.
        output_chars: longest tool observation returned to the agent; longer ones are trimmed with a note.
        bash_timeout_s: default and upper limit of one bash command's wall time.
        sandbox: ``bwrap`` runs bash in the namespaced sandbox, ``local`` in a plain subprocess confined only by its
            working folder (for machines without bubblewrap), ``auto`` picks the sandbox when it is available.
        verify: ``gpu`` verifies and profiles on CUDA; ``skip`` answers verify/profile with "no GPU: verification
            skipped" (builds still run); ``auto`` picks ``gpu`` when CUDA is available, else ``skip``.
        final_reward: ``best``: the episode's reward is that of its best correct kernel (the one kept);
            ``last``: that of the state evaluated at submit or at the end.
        evaluate_on_truncation: when the budget runs out without a submit, evaluate the current workspace once.
        workspace_root: folder under which episode workspaces are created (a temporary folder when None).
        keep_workspace: leave the workspace on disk after ``close()`` (always kept when under ``workspace_root``).
        submit_requires_build: refuse ``submit`` (an error observation; the episode goes on) while nothing has built
            in the episode, for small models that submit before writing anything. Off by default: in training a
            premature submit is the policy's mistake to be scored.
    """

    max_turns: int = TRAIN_MAX_TURNS
    max_tokens: int | None = None
    max_wall_s: float = 4 * 3600.0
    output_chars: int = 12_000
    bash_timeout_s: float = 300.0
    sandbox: SandboxMode = "auto"
    verify: VerifyMode = "auto"
    final_reward: Literal["best", "last"] = "best"
    evaluate_on_truncation: bool = True
    workspace_root: Path | None = None
    keep_workspace: bool = False
    submit_requires_build: bool = False

    @classmethod
    def for_training(cls, **overrides: object) -> "EnvConfig":
        return replace(cls(max_turns=TRAIN_MAX_TURNS), **overrides)  # type: ignore[arg-type]

    @classmethod
    def for_evaluation(cls, **overrides: object) -> "EnvConfig":
        return replace(cls(max_turns=EVAL_MAX_TURNS), **overrides)  # type: ignore[arg-type]


@dataclass(frozen=True)
class AgentConfig:
    """How the loop talks to the policy.

    Attributes:
        context_tokens: the model's context window; the conversation is condensed before it outgrows it.
        condense_at: fraction of ``context_tokens`` at which old tool outputs are condensed.
        keep_recent: assistant turns (with their tool outputs) always kept verbatim when condensing.
        condensed_chars: characters of an old tool output kept when it is condensed.
        nudge_without_tool_call: the text sent back when the model answers without calling a tool.
    """

    context_tokens: int = 131_072
    condense_at: float = 0.8
    keep_recent: int = 6
    condensed_chars: int = 400
    nudge_without_tool_call: str = (
        "No tool call found in your last message. Continue by calling a tool "
        "(write, edit, build, verify, profile, ...) or call `submit` when you are done."
    )
