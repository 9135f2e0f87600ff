"""The judge's timer on the CPU clock: statistics, rotation, checks during timing, adaptivity."""
from __future__ import annotations

import statistics
import time
from typing import Any

import pytest
import torch

from cuda_agent.errors import VerificationError
from cuda_agent.evaluator.timing import (
    OutputMismatchDuringTiming,
    TimingConfig,
    TimingStats,
    time_batched,
    time_forward,
)

_clock = time.perf_counter


def _spin(ms: float) -> None:
    end = _clock() + ms / 1e3
    while _clock() < end:
        pass


def _sets(n: int = 3) -> list[list[torch.Tensor]]:
    return [[torch.randn(16)] for _ in range(n)]


def test_cpu_timing_measures_the_call() -> None:
    stats = time_forward(lambda x: (_spin(2.0), x * 2)[1], _sets(), warmup=2, reps=20)
    assert stats.clock == "perf_counter"
    assert 2.0 <= stats.min_ms <= stats.median_ms <= stats.max_ms
    assert stats.min_ms < 6.0  # an upper bound loose enough for a loaded machine
    assert stats.ci_low_ms <= stats.median_ms <= stats.ci_high_ms
    assert stats.n >= 20


def test_input_sets_are_rotated() -> None:
    sets = _sets(4)
    seen: list[int] = []
    ids = {id(s[0]): k for k, s in enumerate(sets)}
    time_forward(lambda x: seen.append(ids[id(x)]), sets, warmup=0, reps=12, config=TimingConfig(target_rel_ci=0.0))
    timed = seen[1:]  # one warm-up call at least
    assert timed[:8] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_checks_run_on_first_and_sampled_iterations() -> None:
    sets = _sets(3)
    checked: list[int] = []

    def check(i: int, out: torch.Tensor) -> bool:
        checked.append(i)
        return torch.equal(out, sets[i][0] * 2)

    time_forward(lambda x: x * 2, sets, reps=200, check=check, config=TimingConfig(check_fraction=0.2, target_rel_ci=0.0))
    assert checked[0] == 0
    assert 3 <= len(checked) <= TimingConfig().max_checks


def test_wrong_output_during_timing_is_raised() -> None:
    sets = _sets(2)
    calls = {"n": 0}

    def sometimes_wrong(x: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        return x * 2 if calls["n"] < 5 else torch.zeros_like(x)

    with pytest.raises(OutputMismatchDuringTiming) as info:
        time_forward(
            sometimes_wrong, sets, warmup=1, reps=300,
            check=lambda i, out: torch.equal(out, sets[i][0] * 2),
            config=TimingConfig(check_fraction=1.0, max_checks=1000, target_rel_ci=0.0),
        )
    assert isinstance(info.value, VerificationError)
    assert info.value.iteration == 3  # calls 1 (warm-up) .. 4 right, call 5 = timed iteration 3 wrong
    assert "differs from the reference" in str(info.value)


def test_check_exception_is_wrapped() -> None:
    def check(i: int, out: Any) -> None:
        raise AssertionError("shape (3,) != (4,)")

    with pytest.raises(OutputMismatchDuringTiming, match="AssertionError: shape"):
        time_forward(lambda x: x, _sets(), warmup=0, reps=3, check=check)


def test_before_check_refill_catches_a_result_cache() -> None:
    """A candidate that caches its output per input tensor is caught once the set is refilled in place."""
    sets = _sets(2)
    cache: dict[int, torch.Tensor] = {}

    def caching(x: torch.Tensor) -> torch.Tensor:
        key = x.data_ptr()
        if key not in cache:
            cache[key] = x * 2
        return cache[key]

    def refill(i: int) -> None:
        sets[i][0].copy_(torch.randn(16))

    def check(i: int, out: torch.Tensor) -> bool:
        return torch.equal(out, sets[i][0] * 2)

    cfg = TimingConfig(check_fraction=0.5, target_rel_ci=0.0)
    honest = time_forward(lambda x: x * 2, sets, reps=40, check=check, before_check=refill, config=cfg)
    assert honest.n >= 40
    with pytest.raises(OutputMismatchDuringTiming):
        time_forward(caching, sets, reps=40, check=check, before_check=refill, config=cfg)


def test_time_cap_bounds_slow_functions() -> None:
    start = _clock()
    stats = time_forward(lambda x: _spin(100.0), _sets(), warmup=5, reps=50, config=TimingConfig(time_cap_s=0.3))
    elapsed = _clock() - start
    assert 3 <= stats.n < 10
    assert elapsed < 3.0  # uncapped: 55 calls of 100 ms


def test_adaptive_stop_when_median_is_stable() -> None:
    stats = time_forward(lambda x: _spin(0.3), _sets(), reps=20, config=TimingConfig(target_rel_ci=0.05, max_reps=5000))
    assert 20 <= stats.n < 5000
    assert stats.rel_ci <= 0.05





def test_stats_from_samples_and_round_trip() -> None:
    xs = [1.0, 2.0, 3.0, 4.0, 10.0]
    s = TimingStats.from_samples(xs)
    assert s.median_ms == 3.0
    assert s.mean_ms == pytest.approx(statistics.mean(xs))
    assert s.std_ms == pytest.approx(statistics.stdev(xs))
    assert s.cv == pytest.approx(statistics.stdev(xs) / statistics.mean(xs))
    assert (s.min_ms, s.max_ms, s.n) == (1.0, 10.0, 5)
    assert TimingStats.from_dict(s.to_dict()) == s
    legacy = TimingStats.from_dict({"median_ms": 2.0, "mean_ms": 2.0, "std_ms": 0.0, "min_ms": 2.0, "max_ms": 2.0,
                                    "cv": 0.0, "n": 1, "unknown_field": 7})
    assert legacy.ci_low_ms == legacy.ci_high_ms == 2.0
    with pytest.raises(ValueError):
        TimingStats.from_samples([])


def test_median_ci_narrows_with_more_samples() -> None:
    import random

    rng = random.Random(0)
    small = TimingStats.from_samples([1.0 + 0.1 * rng.random() for _ in range(20)])
    large = TimingStats.from_samples([1.0 + 0.1 * rng.random() for _ in range(2000)])
    assert large.rel_ci < small.rel_ci
    assert large.ci_low_ms < large.median_ms < large.ci_high_ms


def test_empty_input_sets_rejected() -> None:
    with pytest.raises(ValueError, match="input_sets is empty"):
        time_forward(lambda: None, [])


def test_batched_timing_divides_the_span_less_the_null_span_by_the_calls() -> None:
    calls: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        _spin(1.0)
        return x * 2

    stats = time_batched(fn, _sets(4), requests=5, warmup_requests=1)
    assert stats.clock == "batched_perf_counter" and stats.n == 5
    assert len(calls) == 4 * (1 + 1 + 5)  # outputs shaped once, one warm-up request, five timed requests
    assert stats.median_ms >= 0.9  # the 1 ms spin per call (wall clock: a loaded CPU only adds to it)
    assert stats.host_median_ms is not None and stats.host_median_ms >= stats.median_ms


def test_batched_timing_times_each_input_set_once_a_request() -> None:
    sets = _sets(3)
    ids = {id(s[0]): i for i, s in enumerate(sets)}
    seen: list[int] = []
    time_batched(lambda x: (seen.append(ids[id(x)]), x)[1], sets, requests=2, warmup_requests=0)
    assert seen == [0, 1, 2] * 3
    with pytest.raises(ValueError):
        time_batched(lambda x: x, [])
