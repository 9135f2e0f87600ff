"""The paper's reward schedule and speedups with their spread.

Discrete: -1 if not correct (a build error, a runtime error, a mismatch or a fired rule all count as not correct);
3 if more than ``threshold`` (5%) faster than both eager PyTorch and ``torch.compile``; 2 if more than 5% faster
than eager only; 1 otherwise. Continuous: compile time / candidate time when correct, -1 otherwise.
"""
from __future__ import annotations

import math

from cuda_agent.evaluator.stats import TimingStats

REWARD_INCORRECT = -1
REWARD_CORRECT = 1
REWARD_BEATS_EAGER = 2
REWARD_BEATS_BOTH = 3
# An episode's reward when nothing could be checked (no GPU where the agent ran): neither credit nor penalty, so an
# unverified episode does not train the policy either way.
REWARD_UNAVAILABLE = 0.0


def _beats(speedup: float | None, threshold: float) -> bool:
    return speedup is not None and math.isfinite(speedup) and speedup > 1.0 + threshold


def discrete_reward(
    correct: bool, speedup_eager: float | None, speedup_compile: float | None, threshold: float = 0.05
) -> int:
    """The paper's -1/1/2/3 reward. A speedup of exactly ``1 + threshold`` does not count as faster; a missing or
    non-finite speedup never does. Raises ValueError on a negative threshold."""
    if threshold < 0:
        raise ValueError(f"discrete_reward: threshold must be >= 0, got {threshold}")
    if not correct:
        return REWARD_INCORRECT
    beats_eager = _beats(speedup_eager, threshold)
    if beats_eager and _beats(speedup_compile, threshold):
        return REWARD_BEATS_BOTH
    if beats_eager:
        return REWARD_BEATS_EAGER
    return REWARD_CORRECT


def continuous_reward(correct: bool, compile_ms: float | None, candidate_ms: float | None) -> float:
    """``compile_ms / candidate_ms`` when correct, -1.0 otherwise.

    Raises:
        ValueError: the candidate is correct but a time is missing, non-finite or not positive (a timing bug
        upstream; a reward of infinity would wreck training).
    """
    if not correct:
        return float(REWARD_INCORRECT)
    if compile_ms is None or candidate_ms is None:
        raise ValueError("continuous_reward: a correct result needs both the compile time and the candidate time")
    if not (math.isfinite(compile_ms) and math.isfinite(candidate_ms)) or compile_ms <= 0 or candidate_ms <= 0:
        raise ValueError(
            f"continuous_reward: times must be finite and positive, got compile={compile_ms} ms, "
            f"candidate={candidate_ms} ms"
        )
    return compile_ms / candidate_ms


def speedup(base_ms: float, cand_ms: float) -> float:
    """``base_ms / cand_ms``; raise ValueError unless both are positive and finite."""
    if not (math.isfinite(base_ms) and math.isfinite(cand_ms)) or base_ms <= 0 or cand_ms <= 0:
        raise ValueError(f"speedup: times must be finite and positive, got base={base_ms} ms, candidate={cand_ms} ms")
    return base_ms / cand_ms


def speedup_with_spread(base: TimingStats, cand: TimingStats) -> tuple[float, float, float]:
    """(median ratio, low, high): the ratio of medians and the range that the medians' 95% confidence
    intervals allow (base low / candidate high, base high / candidate low). Raises ValueError on
    non-positive times."""
    ratio = speedup(base.median_ms, cand.median_ms)
    base_lo = float(base.ci_low_ms if base.ci_low_ms is not None else base.median_ms)
    base_hi = float(base.ci_high_ms if base.ci_high_ms is not None else base.median_ms)
    cand_lo = float(cand.ci_low_ms if cand.ci_low_ms is not None else cand.median_ms)
    cand_hi = float(cand.ci_high_ms if cand.ci_high_ms is not None else cand.median_ms)
    low = speedup(base_lo, cand_hi) if base_lo > 0 and cand_hi > 0 else ratio
    high = speedup(base_hi, cand_lo) if base_hi > 0 and cand_lo > 0 else ratio
    return ratio, min(low, ratio), max(high, ratio)
