"""The single-turn (warm-up) reward: the policy's one response holds a whole KernelBench single-file solution;
it is evaluated on the GPU pool and scored -1 / 1 / 2 / 3 by the evaluator.

`compute_score` has verl's custom reward function signature; the stage config passes ``backend`` through verl's
``reward.custom_reward_function.reward_kwargs``: ``{"kind": "http", "url": ...}`` sends the job to `cuda-agent
serve` on the evaluation nodes, ``{"kind": "ray", ...RayPool arguments}`` to a Ray GPU pool, ``{"kind": "local"}``
evaluates on this machine, ``{"kind": "stand_in"}`` is the stand-in evaluator for machines without a GPU. The spec
is read, and its pool made, by the one backend factory (`cuda_agent.rl.envfactory.BackendSpec`), so the reward
shares the process's pool with the episodes.
"""
from __future__ import annotations

import json
import logging
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping

from cuda_agent.rl.envfactory import BackendSpec
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)
_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
NO_SOLUTION = -1.0


def extract_solution(text: str) -> str | None:
    """The last fenced Python block that defines ``ModelNew`` (or the whole text if it does and has no fence)."""
    blocks = [b for b in _CODE_BLOCK.findall(text) if "class ModelNew" in b]
    if blocks:
        return blocks[-1]
    return text if "class ModelNew" in text and "```" not in text else None


def task_from_extra(extra_info: Mapping[str, Any] | None) -> Task:
    """The task stored in a dataset row's ``extra_info`` (``task_json`` or ``task``); raises `KeyError`."""
    extra = dict(extra_info or {})
    if "task_json" in extra:
        return Task.from_dict(json.loads(extra["task_json"]))
    if isinstance(extra.get("task"), Mapping):
        return Task.from_dict(dict(extra["task"]))
    raise KeyError("extra_info holds no task_json; build the dataset with cuda_agent.rl.data.write_task_parquet")


def score_solution(task: Task, code: str, backend: Mapping[str, Any] | None = None) -> float:
    """Evaluate one single-file solution and return its reward (see the module docstring for ``backend``). Raises
    `ConfigError` for an unknown backend kind."""
    spec = BackendSpec.parse(backend)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-warmup-") as folder:
        path = Path(folder) / "solution.py"
        path.write_text(code)
        if spec.kind == "local":
            from cuda_agent.evaluator import evaluate

            result = evaluate(task, path, None)
        else:
            from cuda_agent.evaluator.result import EvalResult
            from cuda_agent.pool import EvalJob

            result = spec.pool.submit(EvalJob.create(task, path, kind="full")).result(timeout=spec.timeout_s)
            if not isinstance(result, EvalResult):
                result = EvalResult.from_dict(result)
    return float(result.reward)


def compute_score(data_source: str, solution_str: str, ground_truth: Any = None,
                  extra_info: Mapping[str, Any] | None = None, backend: Mapping[str, Any] | None = None,
                  **_: Any) -> float:
    """verl's reward function: -1 when the response holds no solution, else the evaluator's reward."""
    code = extract_solution(solution_str)
    if code is None:
        return NO_SOLUTION
    task = task_from_extra(extra_info)
    try:
        return score_solution(task, code, backend)
    except Exception:  # an evaluation failure must not stop a training step; it is logged and scored -1
        log.exception("warm-up reward: evaluating a solution for %s failed", task.id)
        return NO_SOLUTION

