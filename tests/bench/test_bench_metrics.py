"""Metric functions against hand-computed cases: ties at the threshold, missing tasks, all-incorrect levels."""
from __future__ import annotations

import math

import pytest

from cuda_agent.bench.metrics import MetricsConfig, compute_metrics, fast_p, geomean
from cuda_agent.bench.outcome import TaskOutcome, best_per_task
from cuda_agent.bench.reference import PAPER_MODEL, paper_table
from cuda_agent.errors import ConfigError


def out(tid: str, level: int | None, correct: bool, eager: float | None = None,
        compile_: float | None = None) -> TaskOutcome:
    return TaskOutcome(task_id=tid, level=level, correct=correct, speedup_vs_eager=eager, speedup_vs_compile=compile_)


def test_hand_computed_two_levels_with_tie_missing_and_incorrect() -> None:
    outcomes = [
        out("L1/a", 1, True, 2.0, 1.5),
        out("L1/b", 1, True, 1.05, 1.05),   # exactly at the threshold: not "faster"
        out("L1/c", 1, False, 3.0, 3.0),    # incorrect: speed does not count anywhere
        out("L2/a", 2, True, 4.0, 0.5),
    ]
    expected = {"L1/a": 1, "L1/b": 1, "L1/c": 1, "L1/d": 1, "L2/a": 2, "L2/b": 2}  # L1/d and L2/b missing
    m = compute_metrics(outcomes, expected)
    l1, l2 = m.level(1), m.level(2)
    assert (l1.tasks, l1.attempted, l1.missing, l1.correct) == (4, 3, 1, 2)
    assert l1.pass_rate == pytest.approx(2 / 4)
    assert l1.faster_than_eager_rate == pytest.approx(1 / 4)
    assert l1.faster_than_compile_rate == pytest.approx(1 / 4)
    assert l1.geomean_speedup_vs_eager == pytest.approx(math.sqrt(2.0 * 1.05))
    assert l1.geomean_speedup_vs_compile == pytest.approx(math.sqrt(1.5 * 1.05))
    assert l2.pass_rate == pytest.approx(1 / 2)
    assert l2.faster_than_eager_rate == pytest.approx(1 / 2)
    assert l2.faster_than_compile_rate == 0.0
    assert l2.geomean_speedup_vs_compile == pytest.approx(0.5)
    o = m.overall
    assert (o.tasks, o.correct, o.missing) == (6, 3, 2)
    assert o.pass_rate == pytest.approx(3 / 6)
    assert o.faster_than_eager_rate == pytest.approx(2 / 6)
    assert o.faster_than_compile_rate == pytest.approx(1 / 6)
    # paper footnote: per-level geomeans weighted by the number of problems (4 and 2)
    want = math.exp((4 * math.log(math.sqrt(1.5 * 1.05)) + 2 * math.log(0.5)) / 6)
    assert o.geomean_speedup_vs_compile == pytest.approx(want)
    assert m.pooled_geomean_speedup_vs_compile == pytest.approx((1.5 * 1.05 * 0.5) ** (1 / 3))


def test_threshold_is_configurable_and_strict() -> None:
    outcomes = [out("x", None, True, 1.0, 1.0), out("y", None, True, 1.2, 1.2)]
    assert compute_metrics(outcomes, config=MetricsConfig(faster_threshold=1.0)).overall.faster_than_compile_rate == 0.5
    assert compute_metrics(outcomes, config=MetricsConfig(faster_threshold=0.99)).overall.faster_than_compile_rate == 1.0
    assert compute_metrics(outcomes, config=MetricsConfig(faster_threshold=1.2)).overall.faster_than_compile_rate == 0.0


def test_all_incorrect_level_has_no_geomean_and_is_left_out_of_the_weighted_overall() -> None:
    outcomes = [out("L1/a", 1, True, 2.0, 2.0), out("L3/a", 3, False, 9.0, 9.0), out("L3/b", 3, False)]
    m = compute_metrics(outcomes)
    l3 = m.level(3)
    assert l3.pass_rate == 0.0 and l3.faster_than_compile_rate == 0.0
    assert l3.geomean_speedup_vs_eager is None and l3.geomean_speedup_vs_compile is None
    assert all(v == 0.0 for v in l3.fast_p_vs_compile.values())
    assert m.overall.geomean_speedup_vs_compile == pytest.approx(2.0)
    assert m.overall.pass_rate == pytest.approx(1 / 3)


def test_fast_p_matches_kernelbench_definition() -> None:
    outcomes = [out("a", 1, True, 0.5, 0.4), out("b", 1, True, 1.0, 1.0), out("c", 1, True, 2.5, 2.0),
                out("d", 1, False, 10.0, 10.0)]
    n = 5  # one task of the list has no outcome at all
    assert fast_p(outcomes, n, 0.0) == pytest.approx(3 / 5)  # fast_0 = correct (timed) over all tasks
    assert fast_p(outcomes, n, 1.0) == pytest.approx(1 / 5)  # 1.0 itself is not > 1.0
    assert fast_p(outcomes, n, 2.0) == pytest.approx(0 / 5)  # 2.0 is not > 2.0 vs compile
    assert fast_p(outcomes, n, 2.0, versus="eager") == pytest.approx(1 / 5)
    assert fast_p([], 0, 1.0) == 0.0
    m = compute_metrics(outcomes, {t: 1 for t in "abcde"}, MetricsConfig(fast_p=(0.0, 1.0, 2.0)))
    assert m.overall.fast_p_vs_compile == {0.0: pytest.approx(0.6), 1.0: pytest.approx(0.2), 2.0: 0.0}


def test_best_outcome_per_task_wins_and_outside_tasks_are_dropped() -> None:
    outcomes = [out("t", 1, True, 1.1, 0.9), out("t", 1, True, 1.3, 1.2), out("t", 1, False, 5.0, 5.0),
                out("other", 1, True, 9.0, 9.0)]
    assert best_per_task(outcomes)["t"].speedup_vs_compile == 1.2
    m = compute_metrics(outcomes, {"t": 1})
    assert m.overall.tasks == 1 and m.overall.geomean_speedup_vs_compile == pytest.approx(1.2)


def test_correct_but_untimed_counts_for_pass_rate_only() -> None:
    m = compute_metrics([out("a", 1, True), out("b", 1, True, 2.0, 2.0)])
    assert m.overall.pass_rate == 1.0
    assert m.overall.faster_than_compile_rate == 0.5
    assert m.overall.geomean_speedup_vs_compile == pytest.approx(2.0)


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(ConfigError, match="speedup_vs_compile"):
        out("a", 1, True, 1.0, -1.0)
    with pytest.raises(ConfigError, match="faster_threshold"):
        MetricsConfig(faster_threshold=0)
    with pytest.raises(ConfigError):
        geomean([1.0, 0.0])
    assert geomean([]) is None


def test_paper_table_cells_and_consistency_with_its_footnote() -> None:
    table = paper_table()
    assert len(table.rows) == 24 and PAPER_MODEL in table.models()
    overall = table.get("Overall")
    assert overall is not None
    assert (overall.pass_rate, overall.faster_than_compile_rate, overall.geomean_speedup_vs_compile) == (
        0.988, 0.968, 2.11)
    # the footnote: overall = levels weighted by problem count (100, 100, 50); check every model's rates
    weights = {"Level 1": 100, "Level 2": 100, "Level 3": 50}
    for model in table.models():
        rows = {s: table.get(s, model) for s in weights}
        for key in ("pass_rate", "faster_than_eager_rate", "faster_than_compile_rate"):
            mean = sum(weights[s] * rows[s].value(key) for s in weights) / 250
            assert table.get("Overall", model).value(key) == pytest.approx(mean, abs=1e-9), (model, key)
        for key in ("geomean_speedup_vs_eager", "geomean_speedup_vs_compile"):
            mean = math.exp(sum(weights[s] * math.log(rows[s].value(key)) for s in weights) / 250)
            assert table.get("Overall", model).value(key) == pytest.approx(mean, abs=0.011), (model, key)


def test_outcome_times_are_the_ones_the_speedups_used() -> None:
    """An evaluator result's baselines are cached times scaled by its drift; the outcome's times are the scaled ones,
    so eager_ms / candidate_ms is the reported speedup."""
    from cuda_agent.bench.outcome import TaskOutcome
    from cuda_agent.evaluator.result import EvalResult
    from cuda_agent.evaluator.timing import TimingStats

    cached, compiled, cand = (TimingStats.from_samples([ms]) for ms in (3.0, 2.5, 2.0))
    result = EvalResult(task_id="L1/19_ReLU", stage="timed", correct=True, eager=cached, compile=compiled,
                        candidate=cand, baseline_drift=1.04, speedup_eager=3.0 * 1.04 / 2.0,
                        speedup_compile=2.5 * 1.04 / 2.0)
    for given in (result, EvalResult.from_json(result.to_json())):
        o = TaskOutcome.from_result(given)
        assert (o.eager_ms, o.compile_ms, o.candidate_ms) == pytest.approx((3.12, 2.6, 2.0))
        assert o.eager_ms / o.candidate_ms == pytest.approx(o.speedup_vs_eager)
    undrifted = TaskOutcome.from_result(EvalResult.from_dict({**result.to_dict(), "baseline_drift": None}))
    assert undrifted.eager_ms == pytest.approx(3.0)
