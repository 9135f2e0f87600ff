"""Baseline cache: keys, atomic writes under concurrent processes, one measurement per key, and measurement."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cuda_agent.errors import ConfigError
from cuda_agent.evaluator.baselines import BaselineCache, BaselineTimes, baseline_key, measure_baselines
from cuda_agent.evaluator.stats import TimingStats

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _times(median: float, key: str = "k") -> BaselineTimes:
    return BaselineTimes(
        eager=TimingStats.from_samples([median, median * 1.01, median * 0.99]),
        compile=TimingStats.from_samples([median / 2, median / 2]),
        key=key,
        compile_s=3.5,
        compile_kernels=({"name": "triton_poi_fused_relu_0", "total_us": 12.5, "calls": 1},),
    )


def test_key_is_stable_and_sensitive_to_every_part() -> None:
    base = ("abc", "NVIDIA H200", "2.11.0", "12.8", {"reps": 50, "flush_l2": True})
    key = baseline_key(*base)
    assert key == baseline_key("abc", "NVIDIA H200", "2.11.0", "12.8", {"flush_l2": True, "reps": 50})
    variants = [
        ("abd", *base[1:]),
        (base[0], "NVIDIA H100 80GB HBM3", *base[2:]),
        (*base[:2], "2.10.0", *base[3:]),
        (*base[:3], "13.0", base[4]),
        (*base[:4], {"reps": 51, "flush_l2": True}),
        (*base[:3], None, base[4]),
    ]
    keys = {baseline_key(*v) for v in variants}
    assert key not in keys and len(keys) == len(variants)
    assert key.isalnum() and len(key) == 40


def test_key_rejects_non_json_settings() -> None:
    with pytest.raises(ConfigError, match="plain JSON"):
        baseline_key("abc", "gpu", "2.11", "12.8", {"device": object()})


def test_put_get_round_trip_and_misses(tmp_path: Path) -> None:
    cache = BaselineCache(tmp_path / "b")
    assert cache.get("nothing") is None
    times = _times(2.0)
    path = cache.put("k1", times, meta={"task": "L1/19_ReLU"})
    assert cache.get("k1") == times
    record = json.loads(path.read_text())
    assert record["meta"]["task"] == "L1/19_ReLU"
    path.write_text("{ truncated")
    assert cache.get("k1") is None
    with pytest.raises(ConfigError, match="bad key"):
        cache.get("../escape")
    assert [p.name for p in (tmp_path / "b").iterdir() if p.suffix == ".tmp"] == []


_WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from cuda_agent.evaluator.baselines import BaselineCache, BaselineTimes
    from cuda_agent.evaluator.stats import TimingStats
    cache = BaselineCache(sys.argv[1])
    counter, base = Path(sys.argv[2]), float(sys.argv[3])

    def measure():
        with counter.open("a") as fh:
            fh.write("measured\\n")
        time.sleep(1.5)
        s = TimingStats.from_samples([1.0, 1.1, 0.9])
        return BaselineTimes(s, s, "")

    times, hit = cache.get_or_measure("task-1", measure)
    assert times.key == "task-1"
    for i in range(60):
        samples = [base + i * 1e-3 + j * 1e-6 for j in range(400)]  # big enough that a torn write would show
        stats = TimingStats.from_samples(samples)
        cache.put("shared", BaselineTimes(stats, stats, "shared"))
    print("hit" if hit else "miss")
    """
)


@pytest.mark.slow
def test_two_processes_measure_once_and_never_expose_a_partial_file(tmp_path: Path) -> None:
    """Two processes race for the same key (one measures, the other waits and hits) and then overwrite one record
    many times while this process reads it: every read is a whole record, no temporary file is left behind."""
    cache_dir, counter = tmp_path / "c", tmp_path / "count.txt"
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(cache_dir), str(counter), base], env=env,
                         stdout=subprocess.PIPE, text=True)
        for base in ("1.0", "5.0")
    ]
    cache = BaselineCache(cache_dir)
    reads = 0
    while any(p.poll() is None for p in procs):
        path = cache_dir / "shared.json"
        if path.exists():
            json.loads(path.read_text())  # a torn file would raise here
            got = cache.get("shared")
            assert got is not None and got.eager.median_ms > 0
            reads += 1
    outs = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert counter.read_text().splitlines() == ["measured"]
    assert outs == ["hit", "miss"]
    assert reads > 0
    final = cache.get("shared")
    assert final is not None and final.eager.n == 400
    assert sorted(p.name for p in cache_dir.iterdir() if not p.name.startswith(".")) == ["shared.json", "task-1.json"]
    assert [p.name for p in cache_dir.iterdir() if p.suffix == ".tmp"] == []


def test_measure_baselines_times_eager_and_compiled(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())
    sets = [[torch.randn(8, 32)] for _ in range(2)]
    times = measure_baselines(model, sets, warmup=1, reps=5, key="abc", compile_backend="eager")
    assert times.compile_error == ""
    assert times.key == "abc"
    assert times.eager.n >= 5 and times.compile.n >= 5
    assert times.compile.median_ms > 0 and times.compile_s > 0
    cache = BaselineCache(tmp_path)
    cache.put("abc", times)
    assert cache.get("abc") == times


def test_failed_compile_falls_back_to_eager_with_reason() -> None:
    model = torch.nn.ReLU()
    sets = [[torch.randn(8)]]
    times = measure_baselines(model, sets, warmup=1, reps=3, compile_backend="no-such-backend")
    assert "no-such-backend" in times.compile_error
    assert times.compile == times.eager


def test_drift_factor_is_the_ratio() -> None:
    from cuda_agent.evaluator.judge.measure import drift_factor

    assert drift_factor(3.09, 3.0) == pytest.approx(1.03)
    assert drift_factor(6.0, 3.0) == pytest.approx(2.0)
    for bad in ((0.0, 3.0), (3.0, float("nan")), (-1.0, 3.0)):
        with pytest.raises(ValueError):
            drift_factor(*bad)


def test_a_record_that_changed_is_not_believed(tmp_path: Path) -> None:
    """Baselines are read back with a content check: a cached record whose times were edited is measured again."""
    cache = BaselineCache(tmp_path)
    path = cache.put("k1", _times(2.0, key="k1"))
    record = json.loads(path.read_text())
    record["times"]["eager"]["median_ms"] = 99.0
    path.write_text(json.dumps(record))
    assert cache.get("k1") is None
    calls = []
    times, hit = cache.get_or_measure("k1", lambda: calls.append(1) or _times(3.0, key="k1"))
    assert not hit and calls == [1] and times.eager.median_ms == pytest.approx(3.0)
    again, hit = cache.get_or_measure("k1", lambda: _times(5.0, key="k1"), refresh=True)
    assert not hit and again.eager.median_ms == pytest.approx(5.0) and cache.get("k1").eager.median_ms == 5.0


def test_scaled_timing_stats_scale_every_time_and_keep_the_spread() -> None:
    stats = TimingStats.from_samples([1.0, 1.2, 0.9, 1.1], host_median_ms=1.1, hidden_ms=0.1)
    double = stats.scaled(2.0)
    for name in ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "ci_low_ms", "ci_high_ms", "host_median_ms",
                 "hidden_ms"):
        assert getattr(double, name) == pytest.approx(2 * getattr(stats, name)), name
    assert (double.cv, double.n, double.clock) == (stats.cv, stats.n, stats.clock)
    assert double.rel_ci == pytest.approx(stats.rel_ci)
    with pytest.raises(ValueError):
        stats.scaled(0.0)


@pytest.mark.slow
def test_a_profiled_evaluation_times_eager_again_and_scales_or_remeasures(tmp_path: Path) -> None:
    """The speedups use the cached baselines times the drift measured now (within the limit), or baselines measured
    again (beyond it, never a capped factor); the result says which."""
    from cuda_agent.evaluator import EvalConfig
    from cuda_agent.evaluator.judge.pipeline import run_job
    from cuda_agent.evaluator.result import EvalResult

    from evalcases import resolve_task

    task = resolve_task("small_linear_relu")
    solution = Path(__file__).parent / "cases" / "cpu" / "honest_linear_relu.py"
    config = EvalConfig(mode="relaxed", device="cpu", baseline_cache_dir=str(tmp_path), warmup=2, reps=20,
                        baseline_drift_limit=0.9)
    job = {"task": task.to_dict(), "solution": str(solution), "config": config.to_dict()}
    result = EvalResult.from_dict(run_job(job))
    assert result.stage == "timed", result.reason
    assert result.eager_paired is not None and result.eager_paired.n >= 3
    measured = result.eager_paired.median_ms / result.eager.median_ms
    if abs(measured - 1) <= 0.9:
        assert result.baseline_drift == pytest.approx(measured)
    else:
        assert result.baseline_drift == 1.0 and any("measured again" in n for n in result.notes)
    assert result.speedup_eager == pytest.approx(result.eager.median_ms * result.baseline_drift
                                                 / result.candidate.median_ms)

    off = EvalResult.from_dict(run_job({**job, "config": {**config.to_dict(), "baseline_drift_limit": 0.0}}))
    assert off.stage == "timed" and off.eager_paired is None
    assert off.speedup_eager == pytest.approx(off.eager.median_ms / off.candidate.median_ms)
