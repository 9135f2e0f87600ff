"""Execution filters on small CPU shapes: each rejection reason from a task built to trigger it."""
from __future__ import annotations

import pytest

from cuda_agent.synth.filters import FilterConfig, run_filters, set_constant, size_constants, static_check

FAST = FilterConfig(min_ms=0.0, max_ms=10_000.0, check_compile=False)


def test_a_good_task_passes(make_task) -> None:
    result = run_filters(make_task("        return torch.tanh(x) * 2.0 + 1.0"), FAST)
    assert result.ok, result
    assert result.runtime_ms is not None and result.runtime_ms > 0


def test_stochastic_operator_is_rejected_statically(make_task) -> None:
    code = make_task("        return self.drop(x) + 1.0", init="        self.drop = nn.Dropout(0.5)\n")
    assert static_check(code).reason == "stochastic_op"
    assert run_filters(code, FAST).reason == "stochastic_op"
    noisy = make_task("        return x + torch.randn_like(x)")
    assert run_filters(noisy, FAST).reason == "stochastic_op"


def test_seeded_parameter_init_is_not_stochastic(make_task) -> None:
    code = make_task("        return x * self.w", init="        self.w = nn.Parameter(torch.rand(dim) + 0.5)\n")
    assert static_check(code) is None
    assert run_filters(code, FAST).ok


def test_hidden_randomness_is_caught_by_running_twice(make_task) -> None:
    assert static_check(make_task("        return x * (1.0 + random.random())")).reason == "stochastic_op"
    code = make_task("        return x * float(time.perf_counter_ns() % 997 + 1)", extra="import time")
    assert static_check(code) is None
    assert run_filters(code, FAST).reason == "nondeterministic"


@pytest.mark.parametrize(
    ("forward", "reason"),
    [
        ("        return x * 0.0", "degenerate_zero"),
        ("        return torch.ones_like(x) * 3.0", "degenerate_constant"),
        ("        return torch.arange(x.numel(), dtype=x.dtype).reshape(x.shape)", "degenerate_input_independent"),
        ("        return torch.log(x - 100.0)", "non_finite"),
        ("        return x @ torch.ones(3, 3)", "eager_failed"),
    ],
)
def test_degenerate_and_failing_tasks_are_rejected(make_task, forward: str, reason: str) -> None:
    result = run_filters(make_task(forward), FAST)
    assert not result.ok and result.reason == reason, result


def test_too_fast_task_is_rejected_by_the_band_when_it_cannot_grow(make_task) -> None:
    code = make_task("        return torch.tanh(x)")
    result = run_filters(code, FilterConfig(min_ms=50.0, max_ms=10_000.0, scale=False, check_compile=False))
    assert result.reason == "too_fast" and result.runtime_ms < 50.0
    capped = FilterConfig(min_ms=1e6, max_ms=1e7, check_compile=False, max_input_bytes=1 << 20)
    assert run_filters(code, capped).reason == "too_fast"


def test_too_slow_task_is_rejected(make_task) -> None:
    code = make_task("        return torch.tanh(x)", batch=1, dim=1 << 20)
    result = run_filters(code, FilterConfig(min_ms=0.0, max_ms=1e-4, check_compile=False))
    assert result.reason == "too_slow"


def test_scaling_grows_batch_size_into_the_band(make_task) -> None:
    code = make_task("        return torch.sigmoid(x) * torch.tanh(x) + x", batch=1, dim=256)
    result = run_filters(code, FilterConfig(min_ms=2.0, max_ms=5_000.0, check_compile=False, max_input_bytes=1 << 30))
    assert result.ok, result
    assert result.scale > 1 and result.runtime_ms >= 2.0
    assert size_constants(result.code)["batch_size"] == result.scale
    assert size_constants(result.code)["dim"] == 256


def test_set_constant_rewrites_only_the_module_level_line(make_task) -> None:
    code = make_task("        return x + batch_size")
    assert "batch_size = 9" in set_constant(code, "batch_size", 9)
    with pytest.raises(ValueError):
        set_constant(code, "missing", 1)


@pytest.mark.slow
def test_compile_filter_runs_compiles_and_compares(make_task) -> None:
    good = make_task("        return torch.tanh(x) * 2.0 + 1.0")
    config = FilterConfig(min_ms=0.0, max_ms=10_000.0, compile_backend="aot_eager")
    result = run_filters(good, config)
    assert result.ok and result.compile_s is not None
    diverging = make_task(
        "        if torch.compiler.is_compiling():\n            return x * 2.0\n        return x"
    )
    assert run_filters(diverging, config).reason == "compile_mismatch"
    broken = FilterConfig(min_ms=0.0, max_ms=10_000.0, compile_backend="no_such_backend")
    assert run_filters(good, broken).reason == "compile_failed"


@pytest.mark.gpu
def test_gpu_run_grows_a_small_task_into_the_1_to_100_ms_band_and_compiles(make_task) -> None:
    code = make_task("        return torch.sigmoid(x) * torch.tanh(x) + x", batch=1, dim=4096)
    result = run_filters(code, FilterConfig(device="cuda", min_ms=1.0, max_ms=100.0))
    assert result.ok, result
    assert 1.0 <= result.runtime_ms <= 100.0 and result.scale > 1
    assert result.compile_s is not None
