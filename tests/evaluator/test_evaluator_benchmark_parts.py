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


def test_gpu_clock_windows_summarise_each_devices_samples() -> None:
    """The benchmarks' clock sampler (`benchmarks/gpu_clocks.py`): a measurement's window holds only the samples
    taken inside it, by device, with the clock spread, the median power, the hottest reading and the share of
    samples each clock-event reason was active in. On a machine without NVML it samples nothing and says why."""
    with loaded_script("gpu_clocks") as clocks_module:
        Sample = clocks_module.Sample
        sampler = clocks_module.ClockSampler()
        for at, device, sm, power, temp, bits in [(9.0, 0, 1980, 300.0, 40, 0x1), (10.0, 0, 1980, 500.0, 50, 0),
                                                  (10.5, 0, 1500, 690.0, 61, 0x4 | 0x20), (10.6, 1, 1755, 420.0, 45, 0),
                                                  (11.0, 0, 1600, 680.0, 60, 0x4), (12.0, 0, 1980, 100.0, 35, 0x1)]:
            sampler.add(Sample(at, device, sm, 2619, power, temp, bits))
        window = sampler.window(10.0, 11.0)
        assert set(window) == {"0", "1"}
        zero = window["0"]
        assert zero["samples"] == 3 and zero["sm_mhz"] == [1500, 1600, 1980] and zero["temp_c_max"] == 61
        assert zero["power_w"] == 680.0
        assert zero["reasons"] == {"sw_power_cap": round(2 / 3, 3), "sw_thermal": round(1 / 3, 3)}
        assert window["1"]["samples"] == 1 and window["1"]["reasons"] == {}
        assert sampler.window(12.5, 13.0) == {}
        assert clocks_module.reason_names(0x1 | 0x40 | 0x10000) == ["idle", "hw_thermal", "0x10000"]
        with pytest.raises(ValueError, match="interval_s"):
            clocks_module.ClockSampler(interval_s=0)
        live = clocks_module.ClockSampler(interval_s=0.01).start()
        try:
            import shutil
            if shutil.which("nvidia-smi") is None:  # no driver here: nothing sampled, and why
                assert not live.running and "NVML" in live.error
        finally:
            live.stop()


def test_the_copy_probes_kernel_copy_is_bit_exact() -> None:
    """`timing_vs_ncu.sm_copy`, the kernel copy the copy hand-over probe times against the runner's memcpy, copies
    every bit (NaN payloads, negative zero, half and bool outputs, sizes of every alignment, a non-contiguous source),
    as the runner's copy must: a probe of an inexact copy would time other work."""
    import torch

    with loaded_script("timing_vs_ncu") as ncu:
        floats = torch.tensor([float("nan"), -0.0, float("inf"), 1e-45, -3.5])
        floats.view(torch.int32)[0] = 0x7FC00123  # a NaN with a payload
        sources = [floats, torch.randn(7, dtype=torch.float16), torch.rand(13) > 0.5,
                   torch.randint(-9, 9, (3, 5), dtype=torch.int64), torch.randn(6, 4).t(), torch.empty(0)]
        for src in sources:
            dst = torch.empty_like(src, memory_format=torch.contiguous_format)
            ncu.sm_copy(torch, dst, src)
            want = src.contiguous().reshape(-1).view(torch.uint8)
            assert torch.equal(dst.reshape(-1).view(torch.uint8), want), src.dtype
