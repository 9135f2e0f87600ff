"""`AgentEnv`: one episode of kernel optimisation as a Gymnasium-style environment.

``reset(task)`` materialises a workspace and returns the first observation (system prompt with SKILL.md, and the
task); ``step(tool_call)`` runs one tool and returns ``(observation, reward, terminated, truncated, info)``;
``close()`` frees the sandbox and the workspace. ``terminated``: the agent submitted, or a fatal error (the sandbox
or workspace is gone). ``truncated``: the turn, token or wall-clock budget is spent. The reward is 0 until the episode
ends, then the final reward (`EnvConfig.final_reward`). The agent loop and the RL adapters both drive this class.
"""
from __future__ import annotations

import logging
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from cuda_agent.agent.backend import BuildSummary, EvalBackend, EvalKind, LocalBackend, render_result
from cuda_agent.agent.best import BestKernel, is_candidate
from cuda_agent.agent.config import EnvConfig
from cuda_agent.agent.files import ToolError, WorkspaceFiles
from cuda_agent.agent.prompts import system_prompt, task_prompt
from cuda_agent.agent.runner import Shell, make_shell
from cuda_agent.agent.step_info import EpisodeEnd, StepInfo
from cuda_agent.agent.tools import MalformedCallError, ToolRegistry, trim
from cuda_agent.agent.types import Message, ToolCall, Usage
from cuda_agent.errors import CudaAgentError, SandboxError, WorkspaceError
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.evaluator.reward_schedule import REWARD_INCORRECT, REWARD_UNAVAILABLE
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

# What each `cuda-agent` command accepts (from a tool call or typed in the sandbox's bash).
COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {"build": (), "verify": (), "profile": ("--breakdown",), "submit": ()}

StepResult = tuple[str, float, bool, bool, StepInfo]


class EpisodeOverError(CudaAgentError):
    """``step`` was called after the episode ended, or before ``reset``."""


@dataclass(frozen=True)
class EnvState:
    """What a resumed episode restores: counters, the clock, and the best kernel so far."""

    turns: int = 0
    usage: Usage = Usage()
    elapsed_s: float = 0.0
    best: BestKernel | None = None
    last_evaluation: EvalResult | None = None
    malformed_calls: int = 0
    builds_ok: int = 0


class AgentEnv:
    """One episode at a time; ``backend`` builds and evaluates (a `LocalBackend` on this machine by default)."""

    def __init__(self, config: EnvConfig | None = None, backend: EvalBackend | None = None) -> None:
        self.config = config or EnvConfig()
        self._owns_backend = backend is None
        self.backend: EvalBackend = backend or LocalBackend(verify=self.config.verify)
        self.registry = ToolRegistry()
        self.task: Task | None = None
        self.workspace: Path | None = None
        self.files: WorkspaceFiles | None = None
        self._shell: Shell | None = None
        self._owns_workspace = False
        self._lock = threading.RLock()
        self._clear()

    def _clear(self) -> None:
        self.turns = 0
        self.malformed_calls = 0
        self.builds_ok = 0
        self.usage = Usage()
        self._started = time.monotonic()
        self._elapsed_before = 0.0
        self.submitted = False
        self.fatal: str | None = None
        self.done = False
        self.best: BestKernel | None = None
        self.last_build: BuildSummary | None = None
        self.last_evaluation: EvalResult | None = None
        self.evaluations: list[EvalResult] = []
        self._step_clear()

    def _step_clear(self) -> None:
        """Forget what the previous step ran (its `StepInfo` is built from these)."""
        self._step_malformed = False
        self._step_build: BuildSummary | None = None
        self._step_evaluations: list[EvalResult] = []
        self._step_best_changed = False

    # ---- the Env API -------------------------------------------------------------------------------------------

    def reset(self, task: Task, *, workspace: Path | None = None, state: EnvState | None = None) -> str:
        """Start an episode for ``task`` and return the first observation.

        ``workspace``: use this folder (an existing workspace is reopened, which is how a run resumes); otherwise a
        new one is made under ``config.workspace_root`` or a temporary folder. ``state`` restores a resumed episode's
        counters. Raises `WorkspaceError` if the workspace cannot be made, `SandboxError` if bash cannot be set up.
        """
        self._end_episode()
        self._clear()
        self.task = task
        self.workspace, self._owns_workspace = self._make_workspace(task, workspace)
        self._shell = make_shell(self.config.sandbox, self.workspace, self._broker_handler)
        self.files = WorkspaceFiles(self._shell)
        if state is not None:
            self.turns, self.usage, self._elapsed_before = state.turns, state.usage, state.elapsed_s
            self.best, self.last_evaluation = state.best, state.last_evaluation
            self.malformed_calls, self.builds_ok = state.malformed_calls, state.builds_ok
        return self.system_prompt + "\n\n" + self.task_prompt

    def step(self, tool_call: ToolCall | Mapping[str, Any]) -> StepResult:
        """Run one tool call; never raises for a bad call (it becomes an error observation and counts as a turn).
        Raises `EpisodeOverError` if the episode has ended or was never started."""
        if self.task is None or self.files is None:
            raise EpisodeOverError("step() before reset(): call reset(task) first")
        if self.done:
            raise EpisodeOverError("the episode has ended (submitted, fatal error or budget spent); call reset()")
        call = _as_tool_call(tool_call)
        with self._lock:
            self.turns += 1
            self._step_clear()
            started = time.monotonic()
            error: str | None = None
            try:
                try:
                    tool, args = self.registry.validate(call)
                except MalformedCallError:
                    self.malformed_calls += 1
                    self._step_malformed = True
                    raise
                observation = tool.function(self, **args)
            except ToolError as exc:
                error = str(exc)
                observation = f"error: {exc}"
            except (SandboxError, WorkspaceError) as exc:
                self.fatal = f"{type(exc).__name__}: {exc}"
                error = self.fatal
                observation = f"fatal error: {exc}; the episode ends"
            except Exception as exc:  # a tool bug must not end a training run
                log.exception("tool %s failed", call.name)
                error = f"{type(exc).__name__}: {exc}"
                observation = f"error: tool {call.name} failed: {error}"
            observation = trim(observation, self.config.output_chars)
            terminated = self.submitted or self.fatal is not None
            truncated = not terminated and self.budget_spent() is not None
            if truncated and self.config.evaluate_on_truncation:
                self._final_evaluation()
            reward = self.final_reward() if (terminated or truncated) else 0.0
            self.done = terminated or truncated
            info = self._info(call, error, time.monotonic() - started, terminated, truncated, reward)
            return observation, reward, terminated, truncated, info

    def close(self) -> None:
        """Stop the sandbox and delete a workspace this environment created in a temporary folder. A backend the
        environment made itself is closed too (one passed in belongs to the caller)."""
        self._end_episode()
        if self._owns_backend:
            self.backend.close()

    def _end_episode(self) -> None:
        if self._shell is not None:
            try:
                self._shell.close()
            finally:
                self._shell = None
        if self.workspace is not None and self._owns_workspace and not self.config.keep_workspace:
            shutil.rmtree(self.workspace.parent if self.workspace.parent.name.startswith("cuda-agent-ep-")
                          else self.workspace, ignore_errors=True)
        self._owns_workspace = False

    # ---- observations ----------------------------------------------------------------------------------------

    @property
    def system_prompt(self) -> str:
        return system_prompt()

    @property
    def task_prompt(self) -> str:
        if self.task is None:
            raise EpisodeOverError("no task: call reset(task) first")
        return task_prompt(self.task, self.config)

    def initial_messages(self) -> list[Message]:
        """The first two chat messages: the system prompt (with SKILL.md) and the task."""
        return [Message("system", self.system_prompt), Message("user", self.task_prompt)]

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` list for function calling."""
        return self.registry.schemas()

    # ---- budgets and reward ----------------------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        return self._elapsed_before + time.monotonic() - self._started

    def record_usage(self, usage: Usage) -> None:
        """Add a model call's tokens and cost (the loop calls this; the token budget counts them)."""
        self.usage = self.usage + usage

    def budget_spent(self) -> str | None:
        """Which budget is spent (``turns``, ``tokens``, ``wall``), or None."""
        if self.turns >= self.config.max_turns:
            return "turns"
        if self.config.max_tokens is not None and self.usage.total_tokens >= self.config.max_tokens:
            return "tokens"
        if self.elapsed_s >= self.config.max_wall_s:
            return "wall"
        return None

    def final_reward(self) -> float:
        """The episode's reward, always the reward schedule's: the best kernel's (``final_reward='best'``) or the last
        evaluation's; the schedule's incorrect reward when nothing correct was evaluated; its "unavailable" reward
        when nothing could be checked (no GPU: `reward_available` is false)."""
        if self.config.final_reward == "best" and self.best is not None:
            return self.best.reward
        last = self.last_evaluation
        if last is None or last.stage == "skipped":
            return REWARD_UNAVAILABLE if self.reward_unavailable() else float(REWARD_INCORRECT)
        return float(last.reward)

    def reward_unavailable(self) -> bool:
        return self.best is None and all(e.stage == "skipped" for e in self.evaluations) and (
            self.backend.verify_mode == "skip"
        )

    def state(self) -> EnvState:
        return EnvState(self.turns, self.usage, self.elapsed_s, self.best, self.last_evaluation, self.malformed_calls,
                        self.builds_ok)

    # ---- what tools call (the ToolContext protocol) ----------------------------------------------------------

    def run_bash(self, command: str, timeout: float) -> str:
        if self._shell is None:
            raise SandboxError("the sandbox is closed")
        if not command.strip():
            raise ToolError("command is empty")
        limit = max(1.0, min(float(timeout), self.config.bash_timeout_s))
        result = self._shell.exec(command, timeout=limit)
        text = result.output
        for violation in result.violations:
            text += f"\n[sandbox: {violation.kind}: {violation.detail}]"
        if result.truncated_bytes:
            text += f"\n[... {result.truncated_bytes} more bytes of output were discarded while the command ran]"
        if result.timed_out:
            text += f"\n[killed after {limit:.0f} s: the command ran past its time limit]"
        elif result.exit_code != 0:
            text += f"\n[exit code {result.exit_code}]"
        return text if text.strip() else f"(no output, exit code {result.exit_code})"

    def run_command(self, command: str, args: Sequence[str] = ()) -> str:
        text, _ = self.handle_command(command, list(args))
        return text

    def _broker_handler(self, command: str, args: list[str]) -> tuple[str, int]:
        # Runs on the broker's thread while step() (holding the lock) waits for the bash command that called it.
        return self.handle_command(command, args)

    def handle_command(self, command: str, args: list[str]) -> tuple[str, int]:
        """``cuda-agent build|verify|profile|submit`` from a tool or from bash: ``(text, exit_code)``."""
        assert self.task is not None and self.workspace is not None
        if command not in COMMAND_OPTIONS:
            return f"cuda-agent: unknown command {command!r}; use {', '.join(COMMAND_OPTIONS)}", 2
        accepted = COMMAND_OPTIONS[command]
        unknown = [a for a in args if a not in accepted]
        if unknown:
            takes = f"takes {', '.join(accepted)}" if accepted else "takes no arguments"
            return f"cuda-agent {command}: unknown argument {unknown[0]!r}; {command} {takes}", 2
        build = self._build()
        if command == "build":
            return build.render(), 0 if build.ok else 1
        kind: EvalKind = "verify" if command == "verify" else "profile"
        evaluation = (self._evaluate(kind, breakdown="--breakdown" in args) if build.ok
                      else self._record(_build_failed(self.task, build)))
        text = build.render() if not build.ok else f"{build.render()}\n{render_result(evaluation, kind)}"
        if command == "submit":
            if self.config.submit_requires_build and not build.ok and not self.builds_ok:
                return (f"{text}\nsubmit refused: nothing has built in this episode yet. Write your kernels under "
                        "kernels/ and ModelNew in model_new.py, build until it succeeds, then submit."), 1
            self.submitted = True
            return f"{text}\nsubmitted: the episode is over. {self._best_line()}", 0
        return text, 0 if evaluation.correct or evaluation.stage == "skipped" else 1

    # ---- internals -------------------------------------------------------------------------------------------

    def _build(self) -> BuildSummary:
        assert self.workspace is not None
        summary = self.backend.build(self.workspace)
        self.last_build = summary
        self.builds_ok += int(summary.ok)
        self._step_build = summary
        return summary

    def _evaluate(self, kind: EvalKind, breakdown: bool = False) -> EvalResult:
        assert self.task is not None and self.workspace is not None
        files = self._snapshot()
        if kind == "verify":
            evaluation = self.backend.verify(self.task, self.workspace)
        else:
            evaluation = self.backend.profile(self.task, self.workspace, breakdown=breakdown)
        self._record(evaluation)
        if is_candidate(evaluation):
            candidate = BestKernel(evaluation, self.turns, files)
            if candidate.improves_on(self.best):
                self.best = candidate
                self._step_best_changed = True
        return evaluation

    def _record(self, evaluation: EvalResult) -> EvalResult:
        self.last_evaluation = evaluation
        self.evaluations.append(evaluation)
        self._step_evaluations.append(evaluation)
        return evaluation

    def _final_evaluation(self) -> None:
        assert self.task is not None
        try:
            build = self._build()
            self._evaluate("profile") if build.ok else self._record(_build_failed(self.task, build))
        except CudaAgentError as exc:
            log.warning("final evaluation failed: %s", exc)

    def _snapshot(self) -> dict[str, str]:
        assert self.workspace is not None
        from cuda_agent.workspace import Workspace

        try:
            raw = Workspace.open(self.workspace).solution_files()
        except CudaAgentError:  # a folder that is not a full workspace (no manifest): its agent files as they are
            raw = {}
            for path in [self.workspace / "model_new.py", *sorted((self.workspace / "kernels").rglob("*"))]:
                if path.is_file():
                    raw[path.relative_to(self.workspace).as_posix()] = path.read_bytes()
        return {rel: content.decode(errors="replace") for rel, content in raw.items()}

    def _best_line(self) -> str:
        if self.best is None:
            return "No correct, profiled kernel was recorded in this episode."
        return (f"Best kernel: turn {self.best.turn}, {self.best.speedup_vs_compile:.3f}x vs torch.compile, "
                f"reward {self.best.reward:g}.")

    def _info(self, call: ToolCall, error: str | None, seconds: float, terminated: bool, truncated: bool,
              reward: float) -> StepInfo:
        end = None
        if terminated or truncated:
            reason = ("submitted" if self.submitted else "fatal") if terminated else (self.budget_spent() or "ended")
            end = EpisodeEnd(reason, self.fatal, not self.reward_unavailable(), reward)
        return StepInfo(turn=self.turns, tool=call.name, error=error, seconds=seconds, elapsed_s=self.elapsed_s,
                        tokens=self.usage.total_tokens, malformed=self._step_malformed, build=self._step_build,
                        evaluations=tuple(self._step_evaluations), best=self.best,
                        best_changed=self._step_best_changed, end=end)

    def _make_workspace(self, task: Task, requested: Path | None) -> tuple[Path, bool]:
        from cuda_agent.workspace import Workspace, create_workspace

        if requested is not None:
            requested = Path(requested)
            if (requested / ".cuda_agent" / "manifest.json").is_file():
                ws = Workspace.open(requested)
                if ws.task.code != task.code:
                    raise WorkspaceError(f"{requested} is a workspace for another task ({ws.task.id}); pick another folder")
                return ws.root, False
            return create_workspace(task, requested).root, False
        if self.config.workspace_root is not None:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", task.id).strip("_") or "task"
            root = Path(self.config.workspace_root) / f"{slug}-{uuid.uuid4().hex[:8]}"
            return create_workspace(task, root).root, False
        parent = Path(tempfile.mkdtemp(prefix="cuda-agent-ep-"))
        return create_workspace(task, parent / "ws").root, True


def _build_failed(task: Task, build: BuildSummary) -> EvalResult:
    """The verdict on a solution that did not build: nothing was evaluated, and the schedule's reward applies."""
    return failure(task.id, "build_failed", build.diagnostics[:2000])


def _as_tool_call(value: ToolCall | Mapping[str, Any]) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, Mapping):
        if "function" in value:
            return ToolCall.from_openai(value)
        args = value.get("arguments", "{}")
        return ToolCall(str(value.get("name") or ""), args if isinstance(args, (str, Mapping)) else str(args),
                        str(value.get("id") or ""))
    return ToolCall(name="", arguments=repr(value))
