"""An evaluation leaves no tensor for the garbage collector: every copy and buffer is freed when its last reference
goes. On the H200, tensors held in reference cycles (a dispatch mode's report, a self-calling closure) kept 100 GB
of 6 GiB outputs alive until the collector ran, and large tasks ran out of memory. The judge runs in this process
here (its candidate in its own sandboxed process).

Both evaluations measure the baselines anew (each has its own empty baseline cache), so ``torch.compile`` runs in
the one that is checked, once working and once failing. CI failed here once, on a machine where inductor could not
compile: a failed compile leaves its graph's FakeTensors in reference cycles. They hold no memory, so only tensors
with real storage are counted; the failing case reproduces that run on any machine."""
from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._subclasses.fake_tensor import FakeTensor

from cuda_agent.evaluator import EvalConfig
from cuda_agent.evaluator.judge.pipeline import run_job

from evalcases import cpu_cases


def _holds_memory(obj: object) -> bool:
    """A tensor with real storage: not a FakeTensor (compile-time stand-in) and not on the meta device."""
    try:
        return isinstance(obj, torch.Tensor) and not isinstance(obj, FakeTensor) and obj.device.type != "meta"
    except ReferenceError:  # a weak proxy among the garbage whose referent is gone
        return False


@pytest.mark.parametrize("compile_works", [True, False], ids=["compile_works", "compile_fails"])
def test_an_evaluation_leaves_no_tensor_in_a_reference_cycle(tmp_path: Path, compile_works: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    if not compile_works:
        monkeypatch.setattr(inductor_config.cpp, "cxx", (None, str(tmp_path / "no-such-compiler")))
        monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    case = {c.name: c for c in cpu_cases()}["honest_linear_relu"]

    def job(cache: str) -> dict:
        config = EvalConfig(mode=case.mode, device="cpu", baseline_cache_dir=str(tmp_path / cache))
        return {"task": case.load_task().to_dict(), "solution": str(case.solution), "config": config.to_dict()}

    run_job(job("first"))  # first-call caches and lazy imports are not the evaluation's garbage
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # also what the evaluation's own collections (before timing) find is kept
    try:
        result = run_job(job("second"))
        gc.collect()
        tensors = [tuple(o.shape) for o in gc.garbage if _holds_memory(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert result["stage"] == "timed", result["reason"]
    assert ("fell back to eager" in " ".join(result["notes"])) != compile_works, result["notes"]
    assert tensors == [], f"tensors left to the garbage collector: {tensors[:10]}"
