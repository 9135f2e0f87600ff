"""The agent loop: ask the policy, run its tool calls in the environment, repeat until an exit.

Exits are exceptions carrying their reason and message (submitted, budget spent, fatal error, policy failure).
The trajectory is appended in a ``finally`` after every turn, so a crash loses at most the turn in flight, and
``run(task, resume=True)`` continues a saved episode from its last complete turn.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_agent.agent.best import BestKernel
from cuda_agent.agent.config import AgentConfig
from cuda_agent.agent.context import condense
from cuda_agent.agent.env import AgentEnv
from cuda_agent.agent.policy import Policy
from cuda_agent.agent.step_info import StepInfo
from cuda_agent.agent.tool_turn import run_tool_calls
from cuda_agent.agent.trajectory import VERSION, Trajectory, TrajectoryError, TrajectoryWriter, now_iso
from cuda_agent.agent.types import AssistantTurn, Message, Usage
from cuda_agent.errors import ContextOverflowError, PolicyError
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

ProgressCallback = Callable[[StepInfo], None]


class AgentExit(Exception):
    """The episode is over; ``reason`` is one of submitted, fatal, turns, tokens, wall, policy_error,
    context_overflow (the endpoint refused the conversation even after condensing it hard)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class EpisodeResult:
    """What an episode produced."""

    task_id: str
    reason: str
    message: str
    reward: float
    reward_available: bool
    turns: int
    usage: Usage
    elapsed_s: float
    best: BestKernel | None
    workspace: Path | None
    trajectory: Path | None
    evaluations: tuple[EvalResult, ...] = field(default_factory=tuple)
    malformed_tool_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "reason": self.reason,
            "message": self.message,
            "reward": self.reward,
            "reward_available": self.reward_available,
            "turns": self.turns,
            "malformed_tool_calls": self.malformed_tool_calls,
            "usage": self.usage.to_dict(),
            "elapsed_s": self.elapsed_s,
            "best": None if self.best is None else self.best.to_dict(with_files=False),
            "workspace": str(self.workspace) if self.workspace else None,
            "trajectory": str(self.trajectory) if self.trajectory else None,
        }


class Agent:
    """Drives one `AgentEnv` with one `Policy`; ``trajectory`` is the JSONL file written as the episode goes."""

    def __init__(self, policy: Policy, env: AgentEnv, config: AgentConfig | None = None, *,
                 trajectory: Path | None = None, progress: ProgressCallback | None = None) -> None:
        self.policy = policy
        self.env = env
        self.config = config or AgentConfig()
        self.trajectory_path = Path(trajectory) if trajectory else None
        self.progress = progress
        self.messages: list[Message] = []
        self._writer: TrajectoryWriter | None = None

    def run(self, task: Task, *, resume: bool = False, workspace: Path | None = None) -> EpisodeResult:
        """Run an episode to its end and return the result. With ``resume`` and an existing trajectory, continue
        it (same task; its workspace is reopened). Raises `TrajectoryError` if the trajectory is for another task."""
        self._start(task, resume, workspace)
        reason, message = "unknown", ""
        try:
            while True:
                self.step()
        except AgentExit as exc:
            reason, message = exc.reason, str(exc)
        result = self._result(task, reason, message)
        if self._writer is not None:
            self._writer.append({"type": "end", "time": now_iso(), **result.to_dict(),
                                 "best": None if result.best is None else result.best.to_dict()})
            self._writer.close()
        return result

    def _start(self, task: Task, resume: bool, workspace: Path | None) -> None:
        path = self.trajectory_path
        if resume and path is not None and path.exists() and path.stat().st_size > 0:
            saved = Trajectory.load(path)
            if saved.header.get("task", {}).get("code") != task.code:
                raise TrajectoryError(f"{path}: saved for task {saved.header.get('task', {}).get('id')}, not {task.id}")
            if saved.end is not None:
                raise TrajectoryError(f"{path}: this episode already ended ({saved.end.get('reason')}); nothing to resume")
            self.env.reset(task, workspace=Path(saved.header["workspace"]), state=saved.env_state())
            self.messages = saved.messages()
            self._writer = TrajectoryWriter(path)
            log.info("resuming %s at turn %d", task.id, self.env.turns)
            return
        if path is not None and path.exists():
            path.unlink()
        self.env.reset(task, workspace=workspace)
        self.messages = self.env.initial_messages()
        if path is not None:
            self._writer = TrajectoryWriter(path)
            self._writer.append({
                "type": "header", "version": VERSION, "time": now_iso(), "task": task.to_dict(),
                "workspace": str(self.env.workspace), "env_config": _config_dict(self.env.config),
                "tools": self.env.tool_schemas(), "messages": [m.to_openai() for m in self.messages],
            })

    def step(self) -> None:
        """One turn: query the policy, run each tool call; raise `AgentExit` when the episode is over."""
        if self.env.done:
            raise AgentExit("ended", "the episode had already ended")
        record: dict[str, Any] = {"type": "turn", "time": now_iso(), "results": [], "messages": []}
        try:
            turn = self._query()
            self.env.record_usage(turn.usage)
            assistant = turn.to_message()
            self._add(assistant, record)
            record["usage"] = turn.usage.to_dict()
            if turn.finish_reason:
                record["finish_reason"] = turn.finish_reason
            answered = run_tool_calls(self.env.step, turn.tool_calls, cut_off=turn.finish_reason == "length",
                                      on_result=self.progress)
            for message in answered.messages:
                self._add(message, record)
            record["results"] = answered.results
            if answered.ended:
                raise AgentExit(answered.end_reason, answered.observations[-1])
        finally:
            if record["messages"] and self._writer is not None:
                state = self.env.state()
                record["env"] = {"turns": state.turns, "usage": state.usage.to_dict(), "elapsed_s": state.elapsed_s,
                                 "malformed_calls": state.malformed_calls, "builds_ok": state.builds_ok}
                self._writer.append(record)

    def _query(self) -> AssistantTurn:
        tools = self.env.tool_schemas()
        try:
            try:
                return self.policy.query(condense(self.messages, self.config), tools)
            except ContextOverflowError:
                log.warning("context overflow; condensing harder and retrying once")
                return self.policy.query(condense(self.messages, self.config, force=True), tools)
        except ContextOverflowError as exc:
            raise AgentExit("context_overflow", "the conversation does not fit the model's context even when condensed "
                                                f"(set --context-tokens to the server's window): {exc}") from exc
        except PolicyError as exc:
            raise AgentExit("policy_error", str(exc)) from exc

    def _add(self, message: Message, record: dict[str, Any]) -> None:
        self.messages.append(message)
        record["messages"].append(message.to_openai())

    def _result(self, task: Task, reason: str, message: str) -> EpisodeResult:
        env = self.env
        return EpisodeResult(
            task_id=task.id, reason=reason, message=message, reward=env.final_reward(),
            reward_available=not env.reward_unavailable(), turns=env.turns, usage=env.usage, elapsed_s=env.elapsed_s,
            best=env.best, workspace=env.workspace, trajectory=self.trajectory_path,
            evaluations=tuple(env.evaluations), malformed_tool_calls=env.malformed_calls,
        )


def _config_dict(config: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()}


def run_episode(task: Task, policy: Policy, env: AgentEnv | None = None, *, config: AgentConfig | None = None,
                trajectory: Path | None = None, resume: bool = False, workspace: Path | None = None,
                progress: ProgressCallback | None = None) -> EpisodeResult:
    """Run one episode (a new `AgentEnv` with default settings unless given) and close the environment."""
    env = env or AgentEnv()
    try:
        return Agent(policy, env, config, trajectory=trajectory, progress=progress).run(
            task, resume=resume, workspace=workspace)
    finally:
        env.close()
