"""The evaluator benchmark's own parts, on the CPU: which GPU each warm worker is pinned to (`--gpus`), and the
result's precision share that it records per case. The corpus itself runs on the H200 (benchmarks/evaluator.py)."""
from __future__ import annotations

import pytest

from cuda_agent.evaluator.result import EvalResult

from benchmark_scripts import loaded_script

@pytest.fixture(scope="module")
def bench():
    with loaded_script("evaluator") as module:
        yield module


def test_one_worker_per_visible_gpu_in_the_visible_order(bench, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, 5,6")
    assert bench.gpu_ids(1) == [{}]  # one GPU: the inherited devices, unchanged
    assert bench.gpu_ids(2) == [{"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "5"}]
    assert [pin["CUDA_VISIBLE_DEVICES"] for pin in bench.gpu_ids(0)] == ["3", "5", "6"]
    with pytest.raises(SystemExit, match="3 GPU"):
        bench.gpu_ids(4)


def test_precision_share_is_the_larger_share_of_either_check() -> None:
    def result(record: dict) -> EvalResult:
        return EvalResult(task_id="t", stage="correct", correct=True, extra={"precision": record} if record else {})

    both = result({"every_call_headroom": 0.2, "probe_headroom": 0.7, "floor_units": 64.0,
                   "depth": "accumulation depth 1 (no contraction)"})
    assert both.precision_share == 0.7
    assert both.precision_summary() == ("largest error 70% of the fp32 precision bound; floor 64 fp32 units, "
                                        "accumulation depth 1 (no contraction)")
    assert result({"every_call_headroom": 1.3, "probe_headroom": None}).precision_share == 1.3
    assert result({}).precision_share is None and result({}).precision_summary() == ""


HANGING_SOLUTION = ("import time\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                    "    def __init__(self, *args):\n        super().__init__()\n\n"
                    "    def forward(self, x):\n        time.sleep(3600)\n")


def test_an_evaluation_cut_by_the_runs_budget_is_not_a_verdict(bench, tmp_path) -> None:
    """A case whose time limit the run's budget set (below the usual limit) and that ran out of it is recorded as
    not run, not as a timeout verdict: it must count neither as a refusal nor as a verdict flip between repeats."""
    import time

    from cuda_agent.evaluator import WarmWorker

    solution = tmp_path / "hang.py"
    solution.write_text(HANGING_SOLUTION)
    entry = bench.Entry(label="cpu/hang_in_forward", path=solution, task="small_linear_relu", mode="relaxed",
                        expect="correct", gpu=False, native=False)
    secrets = bench.plant_secrets()
    try:
        with WarmWorker(env=secrets.env) as worker:
            run = bench.Run([worker], tmp_path, time.perf_counter() + 36, secrets)
            result = run.evaluate(entry)
    finally:
        bench.remove_secrets(secrets)
    # a timeout, or the judge's eval_error where it measured the task's baselines first (a fresh cache)
    assert bench.ran_out_of_time(result), (result.stage, result.reason)
    [row] = run.rows
    assert row["ok"] is None and row["stage"] == "not run (budget)" and "budget" in row["reason"]
