"""`evaluate(task, solution, config)`: the evaluator's one entry point."""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda_agent.errors import WorkspaceError
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.isolation import WarmWorker, run_isolated, stamp, with_caller_seconds
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.evaluator.trusted import stage
from cuda_agent.tasks.task import Task
from cuda_agent.workspace.workspace import MANIFEST

log = logging.getLogger(__name__)


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

    This process runs neither the task's code nor the candidate's: it checks and builds the solution (compilers
    sandboxed, into the trusted build cache), then the judge runs in a sandbox of its own, and what it hands back is
    checked here before it is believed or cached (`cuda_agent.evaluator.trusted`).

    Never raises for anything the candidate or the task does (crash, hang, out of memory: all are results). Raises
    WorkspaceError for a missing solution, PoolError when a warm worker is lost.
    """
    config = config or EvalConfig()
    job = stamp(make_job(task, solution, config))  # the time limit counts the build here too
    from cuda_agent.evaluator.baselines import BaselineCache

    cache = BaselineCache(config.baseline_cache_dir).dir
    cache.mkdir(parents=True, exist_ok=True)
    job["config"]["baseline_cache_dir"] = str(cache.resolve())  # the judge's HOME is not the caller's
    folder = Path(tempfile.mkdtemp(prefix="cuda-agent-stage-", dir=worker.staging_root if worker else None))
    try:
        staged = stage(job, config, folder)
        if isinstance(staged, EvalResult):
            return staged
        if worker is not None:
            result = worker.run(staged, config.hard_limit_s, env)
        else:
            result = run_isolated(staged, config.hard_limit_s, env)
        return with_caller_seconds(result, wall=time.time() - job["started_unix"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def prebuild(task: Task, solution: str | Path, config: EvalConfig) -> bool:
    """Check and build ``solution`` into the trusted build cache as `evaluate` would (compilers sandboxed), without
    evaluating it: a later `evaluate` of the same solution finds its build there. Safe to call from several threads
    at once (each build in a folder of its own). Returns True where it built; False where the solution cannot run,
    is missing or the build raised (logged): its evaluation meets the same and says why. Rationale: on one GPU
    evaluations go one at a time, but builds need only CPU cores; built first, all at once, they no longer queue
    behind each other (a single-file build took 8-54 s on the H200)."""
    folder = Path(tempfile.mkdtemp(prefix="cuda-agent-prebuild-"))
    try:
        return isinstance(stage(stamp(make_job(task, solution, config)), config, folder), dict)
    except WorkspaceError:
        return False
    except Exception as exc:  # noqa: BLE001 - only a head start: the evaluation repeats the build and reports
        log.warning("prebuild of a solution for %s: %s: %s", task.id, type(exc).__name__, str(exc)[:300])
        return False
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def evaluate_in_process(task: Task, solution: str | Path, config: EvalConfig | None = None) -> EvalResult:
    """Run the judge in this process (debugging, and measuring what the judge's sandbox costs). The task's code then
    runs in this process, outside any sandbox: only for tasks you trust. The candidate still runs sandboxed."""
    from cuda_agent.evaluator.judge.pipeline import run_job

    return EvalResult.from_dict(run_job(make_job(task, solution, config or EvalConfig())))
