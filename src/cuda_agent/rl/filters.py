"""The rejection fine-tuning filter: which collected trajectories the actor is fine-tuned on.

Kept: finished episodes with reward > 0, no malformed tool call, and no redundant loop. A redundant loop is the
same tool call (name and arguments) repeated ``max_repeats`` times in a row, or the same (call, output) pair seen
``max_repeats`` times anywhere in the episode: an agent spinning in place, which fine-tuning would teach.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FilterConfig:
    """Attributes:
        min_reward: keep episodes whose reward is strictly above this (the paper: 0).
        max_repeats: this many identical consecutive calls, or identical (call, output) pairs, is a loop.
        drop_malformed: drop episodes with any malformed tool call (bad JSON, unknown tool, bad arguments).
    """

    min_reward: float = 0.0
    max_repeats: int = 3
    drop_malformed: bool = True


@dataclass(frozen=True)
class EpisodeSummary:
    """What the filter reads from one trajectory."""

    path: str
    reward: float | None
    calls: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]
    malformed: int


@dataclass(frozen=True)
class Verdict:
    keep: bool
    reason: str


_MALFORMED_PREFIXES = ("error: no tool call", "error: unknown tool", "error: arguments of")


def is_malformed_output(observation: str, ok: bool | None = None) -> bool:
    """An observation that reports a malformed call (as `AgentEnv` words it)."""
    text = observation.strip()
    if any(text.startswith(p) for p in _MALFORMED_PREFIXES):
        return True
    return bool(ok is False and (" unknown argument" in text or "missing required argument" in text
                                 or " must be " in text.split("\n", 1)[0]))


def find_loop(calls: Sequence[tuple[str, str]], outputs: Sequence[str], max_repeats: int) -> str | None:
    """A description of the first redundant loop, or None."""
    run = 1
    for i in range(1, len(calls)):
        run = run + 1 if calls[i] == calls[i - 1] else 1
        if run >= max_repeats:
            return f"tool call {calls[i][0]} repeated {run} times in a row"
    pairs = Counter(zip(calls, outputs))
    for (call, _), count in pairs.items():
        if count >= max_repeats:
            return f"tool call {call[0]} with the same output seen {count} times"
    return None


def judge(summary: EpisodeSummary, config: FilterConfig = FilterConfig()) -> Verdict:
    if summary.reward is None:
        return Verdict(False, "unfinished episode (no end record)")
    if summary.reward <= config.min_reward:
        return Verdict(False, f"reward {summary.reward:g} <= {config.min_reward:g}")
    if config.drop_malformed and summary.malformed:
        return Verdict(False, f"{summary.malformed} malformed tool call(s)")
    loop = find_loop(summary.calls, summary.outputs, config.max_repeats)
    if loop:
        return Verdict(False, f"redundant loop: {loop}")
    return Verdict(True, "kept")


def summarize_records(records: Sequence[Mapping[str, Any]], path: str = "") -> EpisodeSummary:
    """Read header/turn/end records (the agent's trajectory JSONL) into an `EpisodeSummary`."""
    calls: list[tuple[str, str]] = []
    outputs: list[str] = []
    malformed = 0
    reward: float | None = None
    for record in records:
        kind = record.get("type")
        if kind == "turn":
            tool_calls = {}
            for message in record.get("messages", []):
                for call in message.get("tool_calls") or []:
                    fn = call.get("function", {})
                    tool_calls[call.get("id", "")] = (str(fn.get("name", "")), _canonical(fn.get("arguments", "")))
            for result in record.get("results", []):
                call = tool_calls.get(result.get("tool_call_id", ""), ("", ""))
                observation = str(result.get("observation", ""))
                calls.append(call)
                outputs.append(observation)
                info = result.get("info") or {}
                if is_malformed_output(observation, info.get("ok")):
                    malformed += 1
            malformed += int(record.get("malformed_calls", 0))
        elif kind == "end":
            value = record.get("reward")
            reward = float(value) if isinstance(value, (int, float)) else None
    return EpisodeSummary(path, reward, tuple(calls), tuple(outputs), malformed)


def load_summary(path: str | Path) -> EpisodeSummary:
    """Read one trajectory file; a torn last line is ignored. Raises `OSError` if the file cannot be read."""
    records = []
    lines = Path(path).read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number != len(lines):
                raise
    return summarize_records(records, str(path))


def select(paths: Iterable[str | Path], config: FilterConfig = FilterConfig()) -> tuple[list[Path], dict[str, int]]:
    """The trajectories to keep and a count of verdict reasons (for the stage log)."""
    kept: list[Path] = []
    reasons: Counter[str] = Counter()
    for path in paths:
        verdict = judge(load_summary(path), config)
        reasons[verdict.reason.split(":")[0] if not verdict.keep else "kept"] += 1
        if verdict.keep:
            kept.append(Path(path))
        else:
            log.info("RFT drops %s: %s", path, verdict.reason)
    return kept, dict(reasons)


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), sort_keys=True)
        except json.JSONDecodeError:
            return arguments
    return json.dumps(arguments, sort_keys=True)
