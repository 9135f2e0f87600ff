"""On a real GPU: honest PyTorch (eager and compiled) is never timed below the speed-of-light floor, the device is
found in the table, and baselines are measured with inductor once and then read from the cache."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import pytest
import torch

from cuda_agent.evaluator.baselines import BaselineCache, baseline_key, environment_key_parts, measure_baselines
from cuda_agent.evaluator.speed_of_light import estimate, fraction_of_floor, gpu_spec, spec_for_name
from cuda_agent.evaluator.timing import time_forward

pytestmark = pytest.mark.gpu


def test_device_is_in_the_table() -> None:
    name = torch.cuda.get_device_name()
    spec = gpu_spec()
    assert spec.sm_count == torch.cuda.get_device_properties(0).multi_processor_count
    if any(tag in name for tag in ("H100", "H200", "A100", "L40S", "4090")):
        assert spec_for_name(name) is not None
        assert spec.mem_bandwidth_gbs == spec_for_name(name).mem_bandwidth_gbs  # type: ignore[union-attr]


class _Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(*args)


def _cases() -> list[tuple[str, torch.nn.Module, list[torch.Tensor]]]:
    dev = "cuda"
    return [
        ("relu", _Fn(torch.relu), [torch.randn(64 << 20, device=dev)]),
        ("softmax", _Fn(lambda x: torch.softmax(x, dim=1)), [torch.randn(4096, 8192, device=dev)]),
        ("sum_dim1", _Fn(lambda x: x.sum(dim=1)), [torch.randn(256, 4096, 1024, device=dev)]),
        ("matmul_fp32", _Fn(torch.mm), [torch.randn(4096, 4096, device=dev), torch.randn(4096, 4096, device=dev)]),
        ("matmul_fp16", _Fn(torch.mm), [torch.randn(8192, 8192, device=dev).half(),
                                        torch.randn(8192, 8192, device=dev).half()]),
        ("conv2d", torch.nn.Conv2d(64, 128, 3, padding=1).to(dev), [torch.randn(32, 64, 128, 128, device=dev)]),
        ("linear_gelu", torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU()).to(dev),
         [torch.randn(8192, 4096, device=dev)]),
    ]


@pytest.mark.slow
def test_honest_pytorch_is_never_below_the_floor() -> None:
    spec = gpu_spec()
    for name, model, inputs in _cases():
        with torch.no_grad():
            out = model(*inputs)
        sol = estimate(model, inputs, out, spec)
        stats = time_forward(model, [inputs], reps=20)
        assert stats.min_ms >= sol.floor_ms, (name, stats, sol)  # no real time is below the floor
        frac = fraction_of_floor(stats.median_ms, sol)
        assert 0.01 < frac <= 1.0, (name, frac, sol)
        del out


@pytest.mark.slow
def test_compiled_pytorch_is_never_below_the_floor() -> None:
    spec = gpu_spec()
    for name, model, inputs in _cases()[:3]:
        sol = estimate(model, inputs, None, spec)
        compiled = torch.compile(model)
        stats = time_forward(compiled, [inputs], reps=20)
        assert stats.min_ms >= sol.floor_ms, (name, stats, sol)  # no real time is below the floor


@pytest.mark.slow
def test_baselines_measured_once_then_cached(tmp_path: Path) -> None:
    model = _Fn(lambda x: torch.nn.functional.gelu(x) * 2).cuda()
    sets = [[torch.randn(16384, 8192, device="cuda")] for _ in range(3)]  # large enough that fusion beats guard overhead
    parts = environment_key_parts()
    key = baseline_key("test-task", parts["gpu_name"] or "", parts["torch_version"] or "", parts["cuda_version"],
                       {"reps": 30})
    cache = BaselineCache(tmp_path)
    t0 = time.perf_counter()
    first, hit1 = cache.get_or_measure(key, lambda: measure_baselines(model, sets, warmup=3, reps=30, key=key))
    miss_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    second, hit2 = cache.get_or_measure(key, lambda: pytest.fail("measured twice"))
    hit_s = time.perf_counter() - t0
    assert (hit1, hit2) == (False, True)
    assert first.compile_error == "" and first.compile_s > 0
    assert second == first
    assert hit_s < 0.05 < miss_s
    assert first.compile.median_ms < first.eager.median_ms  # inductor fuses gelu and the multiply
