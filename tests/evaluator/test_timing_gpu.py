"""The trusted timer on a real GPU: events, L2 flush, hidden side-stream work, tampering, repeatability."""
from __future__ import annotations

import statistics

import pytest
import torch

from cuda_agent.evaluator.timing import TimingConfig, l2_flush_bytes, time_batched, time_forward

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def mats() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")


def test_events_time_a_matmul(mats: tuple[torch.Tensor, torch.Tensor]) -> None:
    a, b = mats
    stats = time_forward(torch.mm, [[a, b]], warmup=3, reps=30)
    assert stats.clock == "cuda_events"
    assert stats.n >= 30
    assert 0.005 < stats.median_ms < 50
    assert stats.hidden_ms < max(0.01, 0.1 * stats.median_ms)
    assert stats.ci_low_ms <= stats.median_ms <= stats.ci_high_ms


def test_tiny_honest_kernels_stay_on_the_event_clock() -> None:
    """Host and event clocks bracket the same work, so launch-bound honest calls are not mistaken for hidden work."""
    x = torch.randn(1024, device="cuda")
    for fn in (torch.relu, lambda t: (t * 2 + 1).sum()):
        stats = time_forward(fn, [[x]], reps=100)
        assert stats.clock == "cuda_events", stats
        assert stats.median_ms < 0.2


def test_flush_buffer_exceeds_l2() -> None:
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    assert l2_flush_bytes(dev) >= 2 * l2


def test_l2_flush_makes_a_cache_resident_read_slower() -> None:
    """Rationale: without a flush, a small input stays in L2 between calls and every kernel looks faster."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    x = torch.randn(max(l2 // 2, 1 << 20) // 4, device="cuda")
    cfg = TimingConfig(target_rel_ci=0.002, max_reps=2000)
    flushed = time_forward(torch.sum, [[x]], reps=200, flush_l2=True, config=cfg)
    warm = time_forward(torch.sum, [[x]], reps=200, flush_l2=False, config=cfg)
    assert flushed.median_ms > 1.05 * warm.median_ms, (flushed, warm)


def test_work_hidden_on_a_side_stream_is_counted(mats: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Rationale: a candidate that launches its real work on a stream the timer's events never see."""
    a, b = mats
    side = torch.cuda.Stream()

    def direct(x: torch.Tensor) -> torch.Tensor:
        for _ in range(8):
            y = a @ b
        return x + y[0, 0]

    def hidden(x: torch.Tensor) -> torch.Tensor:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(8):
                a @ b
        return x + 1

    x = torch.zeros(4, device="cuda")
    honest = time_forward(direct, [[x]], reps=20)
    sneaky = time_forward(hidden, [[x]], reps=20)
    assert honest.clock == "cuda_events"
    assert sneaky.clock == "device_wide"
    assert sneaky.hidden_ms > 0.5 * honest.median_ms
    assert sneaky.median_ms > 0.8 * honest.median_ms, (honest, sneaky)



def test_repeatability_of_a_speedup() -> None:
    """Profiling the same pair ten times gives speedups within 2% (coefficient of variation), the issue's measure.

    Memory-bound work, as most KernelBench kernels are: a compute-bound pair (relu(x @ y) against x @ y) drifted
    from 1.024 to 1.05 over ten profiles on an H200 as its clocks settled, each side reacting differently."""
    x = torch.rand(64 << 20, device="cuda")  # 256 MiB, far beyond L2
    two_passes = lambda t: t * 2 + 1  # noqa: E731
    one_pass = lambda t: t * 2  # noqa: E731
    time_forward(two_passes, [[x]], reps=50)  # clocks up before anything counts
    speedups = []
    for _ in range(10):
        base = time_forward(two_passes, [[x]], reps=50).median_ms
        cand = time_forward(one_pass, [[x]], reps=50).median_ms
        speedups.append(base / cand)
    cv = statistics.stdev(speedups) / statistics.mean(speedups)
    assert cv < 0.02, speedups
    assert 1.3 < statistics.mean(speedups) < 2.5, speedups  # two passes of memory really cost about twice one


def test_output_is_checked_during_gpu_timing(mats: tuple[torch.Tensor, torch.Tensor]) -> None:
    a, b = mats
    expected = a @ b
    checked: list[int] = []

    def check(i: int, out: torch.Tensor) -> bool:
        checked.append(i)
        return torch.allclose(out, expected, atol=1e-3, rtol=1e-3)

    time_forward(torch.mm, [[a, b]], reps=30, check=check)
    assert checked and checked[0] == 0


def test_batched_timing_of_a_10us_kernel_is_its_event_time_without_the_launch_latency() -> None:
    """A relu over 8 MiB (about 4 us of memory traffic at 4.8 TB/s) and a 2048^2 matmul: per-call batched times are
    close to the steady-state event time of back-to-back calls, and far below one isolated call's bracket."""
    xs = [[torch.randn(1 << 21, device="cuda")] for _ in range(32)]
    batched = time_batched(torch.relu, xs, requests=10)
    assert batched.clock == "batched_events"
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(20):
        for (x,) in xs:
            torch.relu(x)
    end.record()
    torch.cuda.synchronize()
    steady = start.elapsed_time(end) / (20 * len(xs))
    isolated = time_forward(torch.relu, xs[:3], reps=50).median_ms
    assert batched.median_ms < isolated
    assert 0.5 * steady <= batched.median_ms <= 1.5 * steady
