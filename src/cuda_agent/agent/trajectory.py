"""Trajectories: every message, tool call, observation and evaluation of an episode, as JSON Lines.

One record per line, appended and fsynced after every turn, so a crashed run can be inspected and resumed (a torn
last line is ignored and cut off before appending). Records: ``header`` (task, config, tools, first messages),
``turn`` (the assistant message, its usage, one result per tool call, the environment's counters) and ``end``
(why it ended, the reward, the best kernel). `export_sft` turns rewarded episodes into chat-format fine-tuning data.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from cuda_agent.agent.best import BestKernel
from cuda_agent.agent.env import EnvState
from cuda_agent.agent.types import Message, Usage
from cuda_agent.errors import CudaAgentError
from cuda_agent.evaluator.result import EvalResult

log = logging.getLogger(__name__)
# 2: evaluations and the best kernel are the evaluator's `EvalResult` dicts (1 had the agent's own summary).
VERSION = 2


class TrajectoryError(CudaAgentError):
    """A trajectory file is missing, unreadable, or belongs to another task."""


class TrajectoryWriter:
    """Append records to a JSONL file, one ``write`` and ``fsync`` per record."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _cut_torn_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        os.write(self._fd, line)
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _cut_torn_tail(path: Path) -> None:
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    log.warning("%s: cutting a torn last record (%d bytes) before appending", path, len(data) - keep)
    with open(path, "r+b") as handle:
        handle.truncate(keep)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Trajectory:
    """A trajectory read back from disk."""

    path: Path
    header: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None

    @classmethod
    def load(cls, path: str | Path) -> "Trajectory":
        """Read ``path``; a torn last line is ignored. Raise `TrajectoryError` if there is no header."""
        path = Path(path)
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise TrajectoryError(f"{path}: cannot read the trajectory: {exc.strerror or exc}") from exc
        records: list[dict[str, Any]] = []
        for number, line in enumerate(lines, start=1):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if number == len(lines):
                    log.warning("%s: ignoring a torn last line", path)
                    break
                raise TrajectoryError(f"{path}:{number}: not a JSON record; the file is damaged") from None
        if not records or records[0].get("type") != "header":
            raise TrajectoryError(f"{path}: no header record; not a cuda-agent trajectory")
        trajectory = cls(path, records[0])
        for record in records[1:]:
            if record.get("type") == "turn":
                trajectory.turns.append(record)
            elif record.get("type") == "end":
                trajectory.end = record
        return trajectory

    def messages(self) -> list[Message]:
        """The full conversation (initial messages, then each turn's assistant message and tool results)."""
        out = [Message.from_openai(m) for m in self.header.get("messages", [])]
        for turn in self.turns:
            out.extend(Message.from_openai(m) for m in turn.get("messages", []))
        return out

    def env_state(self) -> EnvState:
        """Counters and best kernel as of the last saved turn, for `AgentEnv.reset(state=...)`."""
        if not self.turns:
            return EnvState()
        version = self.header.get("version")
        if version != VERSION:
            raise TrajectoryError(f"{self.path}: written in trajectory format {version}, and this cuda-agent resumes "
                                  f"format {VERSION} only; start a new episode (the old file stays readable)")
        env = self.turns[-1].get("env", {})
        best: BestKernel | None = None
        last_eval: EvalResult | None = None
        for turn in self.turns:
            for result in turn.get("results", []):
                info = result.get("info", {})
                if info.get("best_changed") and "files" in info.get("best", {}):
                    best = BestKernel.from_dict(info["best"])
                for evaluation in info.get("evaluations", []):
                    last_eval = EvalResult.from_dict(evaluation)
        return EnvState(
            turns=int(env.get("turns", 0)),
            usage=Usage.from_dict(env.get("usage", {})),
            elapsed_s=float(env.get("elapsed_s", 0.0)),
            best=best,
            last_evaluation=last_eval,
            malformed_calls=int(env.get("malformed_calls", 0)),
            builds_ok=int(env.get("builds_ok", 0)),
        )

    @property
    def reward(self) -> float | None:
        return None if self.end is None else self.end.get("reward")


def export_sft(paths: Iterable[str | Path], out: str | Path, *, min_reward: float = 0.0) -> int:
    """Write finished episodes with reward > ``min_reward`` as chat-format JSONL (``messages``, ``tools``, ``reward``,
    ``task_id``), the format fine-tuning libraries read; return how many were written. Unfinished or unreadable
    trajectories are skipped with a warning."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(out, "w") as handle:
        for path in paths:
            try:
                trajectory = Trajectory.load(path)
            except TrajectoryError as exc:
                log.warning("skipping %s", exc)
                continue
            reward = trajectory.reward
            if reward is None or reward <= min_reward:
                continue
            record = {
                "messages": [m.to_openai() for m in trajectory.messages()],
                "tools": trajectory.header.get("tools", []),
                "reward": reward,
                "task_id": trajectory.header.get("task", {}).get("id"),
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
    return written
