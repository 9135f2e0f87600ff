"""`TimingStats`: a timed function's per-call times summarised, with a confidence interval of the median.

Torch-free on purpose: results carry these, and every package reads results (`cuda_agent.evaluator.result`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence


@dataclass(frozen=True)
class TimingStats:
    """Summary of the per-call times of one timed function, in milliseconds.

    ``ci_low_ms``/``ci_high_ms``: a distribution-free 95% confidence interval of the median. ``clock``: what the
    times are (``cuda_events``, ``device_wide`` when work the events missed was counted, ``perf_counter`` on a
    CPU). ``host_median_ms``: median host-side time of the bracket less the calibrated overhead; ``hidden_ms``:
    how much longer that was than the event time (work on streams the events did not see).
    """

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    cv: float
    n: int
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    clock: str = "cuda_events"
    host_median_ms: float | None = None
    hidden_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.ci_low_ms is None:
            object.__setattr__(self, "ci_low_ms", self.median_ms)
        if self.ci_high_ms is None:
            object.__setattr__(self, "ci_high_ms", self.median_ms)

    @property
    def rel_ci(self) -> float:
        """Half-width of the median's confidence interval relative to the median."""
        if self.median_ms <= 0:
            return math.inf
        return (float(self.ci_high_ms) - float(self.ci_low_ms)) / (2.0 * self.median_ms)  # type: ignore[arg-type]

    def scaled(self, factor: float) -> "TimingStats":
        """The same statistics with every time multiplied by ``factor`` (cv and n unchanged). Raises ValueError
        unless ``factor`` is positive and finite."""
        if not (math.isfinite(factor) and factor > 0):
            raise ValueError(f"TimingStats.scaled: factor must be positive and finite, got {factor}")
        times = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "ci_low_ms", "ci_high_ms", "hidden_ms")
        changes = {name: getattr(self, name) * factor for name in times}
        if self.host_median_ms is not None:
            changes["host_median_ms"] = self.host_median_ms * factor
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TimingStats":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_samples(
        cls, samples_ms: Sequence[float], *, clock: str = "cuda_events", host_median_ms: float | None = None,
        hidden_ms: float = 0.0,
    ) -> "TimingStats":
        """Summarise raw samples; raise ValueError on an empty sequence."""
        if not samples_ms:
            raise ValueError("TimingStats.from_samples needs at least one sample")
        xs = sorted(float(x) for x in samples_ms)
        n = len(xs)
        median = _median_sorted(xs)
        mean = sum(xs) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        lo, hi = _median_ci_sorted(xs)
        return cls(
            median_ms=median, mean_ms=mean, std_ms=std, min_ms=xs[0], max_ms=xs[-1],
            cv=std / mean if mean > 0 else 0.0, n=n, ci_low_ms=lo, ci_high_ms=hi, clock=clock,
            host_median_ms=host_median_ms, hidden_ms=hidden_ms,
        )


def _median_sorted(xs: Sequence[float]) -> float:
    n = len(xs)
    mid = n // 2
    return xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def _median_ci_sorted(xs: Sequence[float]) -> tuple[float, float]:
    """95% order-statistic interval of the median (binomial, normal approximation)."""
    n = len(xs)
    if n < 3:
        return xs[0], xs[-1]
    half = 0.98 * math.sqrt(n)
    lo = max(0, int(math.floor(n / 2 - half)) - 1)
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return xs[lo], xs[hi]


def rel_ci(samples: Sequence[float]) -> float:
    """Half-width of the median's 95% interval relative to the median (0 for a non-positive median)."""
    xs = sorted(samples)
    median = _median_sorted(xs)
    if median <= 0:
        return 0.0
    lo, hi = _median_ci_sorted(xs)
    return (hi - lo) / (2.0 * median)


def median(samples: Sequence[float]) -> float:
    return _median_sorted(sorted(samples))
