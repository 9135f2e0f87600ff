"""`evaluate(task, solution, config)`: the evaluator's one entry point."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.errors import WorkspaceError
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.isolation import WarmWorker, run_isolated
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.tasks.task import Task
from cuda_agent.workspace.workspace import MANIFEST


def make_job(task: Task, solution: str | Path, config: EvalConfig) -> dict[str, Any]:
    """The plain-dict job a worker process runs; raise WorkspaceError if ``solution`` does not exist."""
    path = Path(solution).resolve()
    if not path.exists():
        raise WorkspaceError(f"{path}: no such workspace or solution file")
    if not (path.is_dir() or path.suffix == ".py"):
        raise WorkspaceError(f"{path}: a solution is a workspace folder or a KernelBench single-file .py")
    # Rationale: said here, before a judge starts and sets up the reference (minutes for a large task on a CPU).
    if path.is_dir() and not (path / MANIFEST).is_file():
        raise WorkspaceError(f"{path} is a folder but not a cuda-agent workspace (no {MANIFEST}): make one with "
                             "`cuda-agent workspace new TASK DIR` and put model_new.py and kernels/ in it, or pass a "
                             "single-file .py solution")
    return {"task": task.to_dict(), "solution": str(path), "config": config.to_dict()}


def evaluate(task: Task, solution: str | Path, config: EvalConfig | None = None, *,
             worker: WarmWorker | None = None, env: dict[str, str] | None = None) -> EvalResult:
    """Verify, audit and (when correct) time ``solution`` against ``task`` in an isolated process.

    ``solution``: a workspace folder or a KernelBench single-file solution (.py with ModelNew). ``worker``: a
    started `WarmWorker` to fork from (fast); without one a fresh interpreter is spawned. ``env``: extra
    environment for the evaluation process (``CUDA_VISIBLE_DEVICES`` for a pool's GPU).

    Never raises for anything the candidate does (crash, hang, out of memory: all are results). Raises
    WorkspaceError for a missing solution, PoolError when a warm worker is lost.
    """
    config = config or EvalConfig()
    job = make_job(task, solution, config)
    if worker is not None:
        return worker.run(job, config.timeout_s, env)
    return run_isolated(job, config.timeout_s, env)


def evaluate_in_process(task: Task, solution: str | Path, config: EvalConfig | None = None) -> EvalResult:
    """Run the judge in this process (debugging; the candidate still runs in its own sandboxed process)."""
    from cuda_agent.evaluator.judge.pipeline import run_job

    return EvalResult.from_dict(run_job(make_job(task, solution, config or EvalConfig())))
