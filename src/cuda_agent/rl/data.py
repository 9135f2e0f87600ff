"""Datasets the engines read: task rows for RL (parquet, verl's RLHFDataset layout) and chat rows for RFT.

A task row: ``prompt`` (chat messages), ``data_source``, ``agent_name`` (which verl agent loop runs it),
``reward_model`` (verl's field; unused by our reward), ``extra_info`` (``task_json``: the `Task`, ``index``).
An SFT row: ``messages`` and ``tools`` (verl's MultiTurnSFTDataset and TRL's conversational format). ``tools`` is a
list of JSON-schema dicts, never a JSON string: verl hands it to ``apply_chat_template(tools=...)``, which iterates
it. ``tools_json`` holds the same list as JSON text, because parquet widens the list's schemas to one union type
(every tool gains the others' properties as nulls); verl's RFT run reads it through
`cuda_agent.rl.verl_sft_data.ExactToolsSFTDataset`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from cuda_agent.tasks.task import Task

DATA_SOURCE = "cuda_agent"
SINGLE_TURN_SYSTEM = (
    "You are an expert CUDA engineer. Reply with one complete Python file in a ```python block: it defines "
    "`class ModelNew(nn.Module)` with the same constructor arguments as `Model`, and compiles its CUDA kernels "
    "inline (for example with torch.utils.cpp_extension.load_inline). It must be correct and faster than "
    "torch.compile."
)


def single_turn_messages(task: Task) -> list[dict[str, str]]:
    """The warm-up prompt: write a whole solution in one response."""
    user = (f"Optimise this PyTorch module (task {task.id}) with custom CUDA kernels:\n\n```python\n"
            f"{task.code.rstrip()}\n```")
    return [{"role": "system", "content": SINGLE_TURN_SYSTEM}, {"role": "user", "content": user}]


def task_rows(tasks: Iterable[Task], agent_name: str) -> list[dict[str, Any]]:
    """Rows for verl's RL dataset. ``agent_name``: ``single_turn_agent`` (warm-up) or ``cuda_agent``."""
    rows = []
    for index, task in enumerate(tasks):
        prompt = single_turn_messages(task) if agent_name == "single_turn_agent" else [
            {"role": "user", "content": f"Task {task.id}"}]  # the agent loop takes the real prompt from the env
        rows.append({
            "prompt": prompt, "data_source": DATA_SOURCE, "agent_name": agent_name,
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"task_json": json.dumps(task.to_dict()), "index": index},
        })
    return rows


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write rows with pyarrow (a core dependency); nested values become parquet structs and lists."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path


def sft_rows(trajectory_paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Chat rows from kept trajectories (system, task, then assistant turns and their tool results)."""
    from cuda_agent.agent import Trajectory

    rows = []
    for path in trajectory_paths:
        trajectory = Trajectory.load(path)
        tools = list(trajectory.header.get("tools", []))
        rows.append({"messages": [m.to_openai() for m in trajectory.messages()],
                     "tools": list(tools), "tools_json": json.dumps(tools),
                     "reward": trajectory.reward, "task_id": trajectory.header.get("task", {}).get("id")})
    return rows
