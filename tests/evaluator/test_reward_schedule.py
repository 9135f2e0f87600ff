"""The paper's reward table, its boundaries, the continuous variant and speedups with spread."""
from __future__ import annotations

import math

import pytest

from cuda_agent.evaluator.reward_schedule import continuous_reward, discrete_reward, speedup_with_spread
from cuda_agent.evaluator.timing import TimingStats


@pytest.mark.parametrize(
    ("correct", "eager", "compile_", "expected"),
    [
        (False, 10.0, 10.0, -1),
        (False, None, None, -1),
        (True, 2.0, 2.0, 3),
        (True, 2.0, 1.0, 2),
        (True, 1.06, 1.06, 3),
        (True, 1.06, 1.05, 2),
        (True, 1.05, 1.05, 1),  # exactly 5% faster is not more than 5% faster
        (True, 1.05, 3.0, 1),  # faster than compile alone earns nothing extra
        (True, 0.5, 0.5, 1),
        (True, None, None, 1),
        (True, math.nan, 2.0, 1),
        (True, math.inf, math.inf, 1),
    ],
)
def test_discrete_reward_table(correct: bool, eager: float | None, compile_: float | None, expected: int) -> None:
    assert discrete_reward(correct, eager, compile_) == expected


def test_threshold_is_configurable_and_validated() -> None:
    assert discrete_reward(True, 1.02, 1.02, threshold=0.01) == 3
    assert discrete_reward(True, 1.02, 1.02, threshold=0.05) == 1
    assert discrete_reward(True, 1.0000001, 1.0, threshold=0.0) == 2
    with pytest.raises(ValueError, match="threshold"):
        discrete_reward(True, 2.0, 2.0, threshold=-0.1)


def test_boundary_from_times() -> None:
    # 1.05 computed from times lands on the same float as the literal: still not "more than 5%".
    assert 10.5 / 10.0 == 1.05
    assert discrete_reward(True, 10.5 / 10.0, 10.5 / 10.0) == 1
    assert discrete_reward(True, 10.500001 / 10.0, 10.500001 / 10.0) == 3


def test_continuous_reward() -> None:
    assert continuous_reward(True, 3.0, 1.5) == pytest.approx(2.0)
    assert continuous_reward(True, 1.0, 4.0) == pytest.approx(0.25)
    assert continuous_reward(False, 3.0, 1.5) == -1.0
    assert continuous_reward(False, None, None) == -1.0
    for bad in [(3.0, 0.0), (3.0, -1.0), (math.inf, 1.0), (3.0, math.nan), (None, 1.0)]:
        with pytest.raises(ValueError):
            continuous_reward(True, *bad)


def _stats(median: float, lo: float, hi: float) -> TimingStats:
    return TimingStats(median, median, 0.0, lo, hi, 0.0, 50, ci_low_ms=lo, ci_high_ms=hi)


def test_speedup_with_spread_uses_confidence_intervals() -> None:
    ratio, low, high = speedup_with_spread(_stats(2.0, 1.9, 2.1), _stats(1.0, 0.95, 1.05))
    assert ratio == pytest.approx(2.0)
    assert low == pytest.approx(1.9 / 1.05)
    assert high == pytest.approx(2.1 / 0.95)
    assert low <= ratio <= high


def test_speedup_with_spread_without_interval_collapses_to_ratio() -> None:
    base = TimingStats(3.0, 3.0, 0.0, 3.0, 3.0, 0.0, 1)
    cand = TimingStats(1.5, 1.5, 0.0, 1.5, 1.5, 0.0, 1)
    assert speedup_with_spread(base, cand) == pytest.approx((2.0, 2.0, 2.0))
    with pytest.raises(ValueError):
        speedup_with_spread(base, TimingStats(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1))
