"""The first observation: a system prompt (role, tools, SKILL.md) and the task message (the reference code)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from cuda_agent.tasks.task import Task
from cuda_agent.workspace import skill_text

if TYPE_CHECKING:
    from cuda_agent.agent.config import EnvConfig

_ROLE = """You are an expert CUDA engineer working alone in a workspace, through tools.
Call one or more tools in each reply. File tools (read, write, edit, multi_edit, glob, grep) work on paths relative
to the workspace; bash runs commands in it. The build, verify, profile and submit tools do the same as the
`cuda-agent build|verify|profile|submit` commands described below. Call submit when you are done.
"""


def system_prompt() -> str:
    """The role, the tools, and SKILL.md (the workflow, the rules and the optimisation guide)."""
    return _ROLE + "\n" + skill_text()


def task_prompt(task: Task, config: "EnvConfig") -> str:
    """The task: the reference module (as in model.py) and the budget."""
    budget = f"{config.max_turns} tool calls"
    if config.max_tokens:
        budget += f", {config.max_tokens} tokens"
    return (
        f"Task {task.id}: make this PyTorch model faster than torch.compile with your own CUDA kernels.\n"
        "The reference is in model.py (protected):\n\n"
        f"```python\n{task.code.rstrip()}\n```\n\n"
        "Write ModelNew in model_new.py and your kernels under kernels/, then build, verify and profile; iterate; "
        f"submit when done. Your budget: {budget}. The best verified and profiled version of this episode counts."
    )
