"""An evaluation leaves no tensor for the garbage collector: every copy and buffer is freed when its last reference
goes. On the H200, tensors held in reference cycles (a dispatch mode's report, a self-calling closure) kept 100 GB
of 6 GiB outputs alive until the collector ran, and large tasks ran out of memory. The judge runs in this process
here (its candidate in its own sandboxed process)."""
from __future__ import annotations

import gc

import torch

from cuda_agent.evaluator import EvalConfig
from cuda_agent.evaluator.judge.pipeline import run_job

from evalcases import cpu_cases


def _is_tensor(obj: object) -> bool:
    try:
        return isinstance(obj, torch.Tensor)
    except ReferenceError:  # a weak proxy among the garbage whose referent is gone
        return False


def test_an_evaluation_leaves_no_tensor_in_a_reference_cycle() -> None:
    case = {c.name: c for c in cpu_cases()}["honest_linear_relu"]
    job = {"task": case.load_task().to_dict(), "solution": str(case.solution),
           "config": EvalConfig(mode=case.mode, device="cpu").to_dict()}  # profiled too
    run_job(job)  # first-call caches and lazy imports are not the evaluation's garbage
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = run_job(job)
        gc.collect()
        tensors = [tuple(o.shape) for o in gc.garbage if _is_tensor(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert result["stage"] == "timed", result["reason"]
    assert tensors == [], f"tensors left to the garbage collector: {tensors[:10]}"
