"""Bundled example: a small task (`scaled_silu.py.txt`) for `cuda-agent optimize` with no argument, and a scripted episode
(`scaled_silu_script.json`) that writes a slow-but-correct kernel, profiles it, then a faster one."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

EXAMPLE_TASK_ID = "example/scaled_silu"


def example_dir() -> Path:
    """The folder holding the example files (inside the installed package)."""
    return Path(str(resources.files("cuda_agent.agent.examples")))


def example_task_path() -> Path:
    return example_dir() / "scaled_silu.py.txt"


def example_script_path() -> Path:
    return example_dir() / "scaled_silu_script.json"


def example_task():  # -> Task; typed loosely to keep this module import-light
    """The example `Task` (validated on the meta device)."""
    from cuda_agent.tasks import load_task_file

    task = load_task_file(example_task_path(), source="example", trusted=True)  # shipped with cuda-agent
    from dataclasses import replace

    return replace(task, id=EXAMPLE_TASK_ID, name="scaled_silu")
