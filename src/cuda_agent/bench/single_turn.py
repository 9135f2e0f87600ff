"""Single-turn generation: a model's one-shot solutions for a task set, with the RL warm-up stage's prompt
(`cuda_agent.rl.data.single_turn_messages`), saved so that `cuda-agent bench offline` scores them, on this machine or
later on a GPU host. This is how a base model's row of the paper's table is produced.

Layout of the output folder::

    solutions/<task key>.py      the extracted solution (the last ```python block defining ModelNew); absent when the
                                 reply holds none (bench offline then counts the task as a failure)
    responses/<task key>.json    the whole reply: text, finish reason, token counts, seconds
    generation.json              the model, the prompt's source, the settings, one summary row per task, the totals

Tasks already answered in ``responses/`` are skipped (those whose request failed are asked again), so an interrupted
run continues where it stopped.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from cuda_agent.bench.offline import task_key
from cuda_agent.tasks import Task

log = logging.getLogger(__name__)

PROMPT_SOURCE = "cuda_agent.rl.data.single_turn_messages (the RL warm-up stage's prompt)"


@dataclass(frozen=True)
class Generated:
    """One task's reply."""

    task_id: str
    has_solution: bool
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    error: str = ""

    @property
    def tokens_per_s(self) -> float | None:
        return self.completion_tokens / self.seconds if self.seconds > 0 and self.completion_tokens else None


@dataclass
class GenerationSummary:
    """What `generate_single_turn` did: one row per task and the totals."""

    rows: list[Generated] = field(default_factory=list)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens for r in self.rows)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": len(self.rows),
            "with_solution": sum(r.has_solution for r in self.rows),
            "cut_at_max_tokens": sum(r.finish_reason == "length" for r in self.rows),
            "errors": sum(bool(r.error) for r in self.rows),
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 1),
            "rows": [asdict(r) for r in self.rows],
        }


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def generate_single_turn(tasks: Iterable[Task], policy: Any, out_dir: str | Path, *, meta: dict[str, Any] | None = None,
                         progress: Callable[[Generated], None] | None = None) -> GenerationSummary:
    """Ask ``policy`` (an `OpenAIPolicy`, or anything with its ``query``) for one solution per task, without tools,
    and save replies and extracted solutions under ``out_dir``. A failed request is recorded for its task (no
    solution) and the run goes on. ``meta`` (the model, the command...) is written into ``generation.json``."""
    from cuda_agent.agent.types import Message
    from cuda_agent.errors import PolicyError
    from cuda_agent.rl.data import single_turn_messages
    from cuda_agent.rl.reward import extract_solution

    out = Path(out_dir)
    summary = GenerationSummary()

    def save_summary() -> None:
        _atomic_write(out / "generation.json", json.dumps(
            {**(meta or {}), "prompt": PROMPT_SOURCE, "summary": summary.to_dict()}, indent=1) + "\n")

    for task in tasks:
        key = task_key(task.id)
        response_path = out / "responses" / f"{key}.json"
        if response_path.is_file():
            saved = Generated(**json.loads(response_path.read_text())["row"])
            if not saved.error:  # a request that failed is asked again
                summary.rows.append(saved)
                continue
        messages = [Message(m["role"], m["content"]) for m in single_turn_messages(task)]
        started = time.monotonic()
        text, finish, error = "", "", ""
        prompt_tokens = completion_tokens = 0
        try:
            turn = policy.query(messages, [])
            text, finish = turn.content, turn.finish_reason
            prompt_tokens, completion_tokens = turn.usage.prompt_tokens, turn.usage.completion_tokens
        except PolicyError as exc:
            error = str(exc)[:1000]
            log.warning("%s: no reply: %s", task.id, error)
        seconds = time.monotonic() - started
        code = extract_solution(text) if text else None
        if code is not None:
            _atomic_write(out / "solutions" / f"{key}.py", code)
        row = Generated(task.id, code is not None, finish, prompt_tokens, completion_tokens, round(seconds, 2), error)
        _atomic_write(response_path, json.dumps({"row": asdict(row), "messages": [m.to_openai() for m in messages],
                                                 "response": text}, indent=1) + "\n")
        summary.rows.append(row)
        save_summary()
        if progress is not None:
            progress(row)
    save_summary()
    return summary
