"""The graph clock on a real GPU: `timing.time_graphed` times device work only and refuses what cannot be captured,
and the judge times an honest workspace kernel on replays of one captured request (its kernel tap records the
replays), falls back to host-launched requests for a forward that synchronises, reads back or replays wrong, and checks every
replayed call (a kernel that goes wrong from the second replayed request on is refused)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cuda_agent.evaluator import EvalConfig, evaluate
from cuda_agent.evaluator.timing import GraphCaptureError, time_batched, time_graphed
from cuda_agent.workspace import create_workspace

from evalcases import gpu_cases

pytestmark = pytest.mark.gpu

CASE = {c.name: c for c in gpu_cases()}["honest_fused_elementwise"]

SYNCS = """
import torch
import torch.nn as nn
from binding import ops


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        ops.fused(x, out)
        torch.cuda.synchronize()  # honest but not capturable: the judge must time it host-launched
        return out
"""

READS_BACK = """
import torch
import torch.nn as nn
from binding import ops


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        torch.cuda.current_stream().synchronize()  # a wait on the host: capture fails inside forward
        ops.fused(x, out)
        return out
"""

LEGACY_STREAM = (CASE.solution / "kernels" / "fused.cu").read_text().replace(", 0, ca::stream()>>>", ">>>")

CAPTURES_OTHER_WORK = """
import torch
import torch.nn as nn
from binding import ops


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        if torch.cuda.is_current_stream_capturing():
            return out  # no kernel in the graph: its replays leave the output unwritten; the trial replay sees it
        ops.fused(x, out)
        return out
"""

WRONG_FROM_THE_SECOND_REPLAY = r"""
#include "cuda_agent.h"

// Counted on the device, by kernels captured in the graph only: right in every eager call and in the first replayed
// request (the judge's trial replay), then the input passes through.
__device__ unsigned long long replayed;
__device__ unsigned long long per_request;

__global__ void count(unsigned long long index) {
  if (index > per_request) per_request = index;
  replayed += 1;
}

__global__ void fused_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int captured) {
  bool lazy = captured && replayed > per_request;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = lazy ? v : v / (1.0f + expf(-v)) + 0.5f * v * v;
  }
}

static unsigned long long captured_calls = 0;

void fused(ca::Tensor x, ca::Tensor out) {
  CA_CHECK(x.dtype == ca::DType::Float32 && x.is_contiguous(), "fused expects contiguous float32");
  int64_t n = x.numel();
  int64_t blocks = (n + 255) / 256;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(ca::stream(), &status);
  int captured = status == cudaStreamCaptureStatusActive;
  if (captured) count<<<1, 1, 0, ca::stream()>>>(++captured_calls);
  fused_kernel<<<(unsigned)blocks, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n, captured);
}
CA_EXPORT(fused);
"""


def _workspace(root: Path, model_new: str | None = None, kernel: str | None = None) -> Path:
    files: dict[str, bytes | str] = {"model_new.py": model_new or (CASE.solution / "model_new.py").read_text()}
    for path in sorted((CASE.solution / "kernels").rglob("*")):
        if path.is_file():
            files[path.relative_to(CASE.solution).as_posix()] = path.read_bytes()
    if kernel is not None:
        files["kernels/fused.cu"] = kernel
    return create_workspace(CASE.load_task(), root, solution=files).root


def _evaluate(root: Path, warm_worker, tmp_path: Path):
    config = EvalConfig(mode=CASE.mode, reps=20, warmup=3, baseline_cache_dir=str(tmp_path / "baselines"))
    return evaluate(CASE.load_task(), root, config, worker=warm_worker)


def test_graphed_time_is_device_time_and_refuses_what_cannot_be_captured() -> None:
    torch.manual_seed(0)
    small = [[torch.randn(1 << 16, device="cuda")] for _ in range(16)]  # a few us of work: launch-bound
    graphed = time_graphed(torch.relu, small, requests=10)
    launched = time_batched(torch.relu, small, requests=10)
    assert graphed.clock == "graph_events" and 0 < graphed.median_ms < launched.median_ms, (graphed, launched)
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    big = [[a, b] for _ in range(2)]  # milliseconds of fp32 GEMM: both clocks see the same device work
    g, h = time_graphed(torch.mm, big, requests=10), time_batched(torch.mm, big, requests=10)
    assert abs(g.median_ms - h.median_ms) <= 0.03 * h.median_ms, (g, h)
    with pytest.raises(GraphCaptureError):
        time_graphed(lambda t: t * float(t.sum().item()), small[:2])
    # a failed capture leaves the process's random draws working (torch 2.11 left its generator in capture mode)
    assert torch.randn(8, device="cuda").isfinite().all()
    assert time_graphed(torch.relu, small, requests=3).clock == "graph_events"


def test_an_honest_kernel_is_timed_on_replays_with_its_kernels_recorded(warm_worker, tmp_path: Path) -> None:
    verdicts = []
    for run in range(2):
        result = _evaluate(_workspace(tmp_path / f"ws{run}"), warm_worker, tmp_path)
        assert result.stage == "timed" and not result.rules_fired, (result.stage, result.reason, result.notes)
        clock = result.extra["judge_clock"]
        assert clock["clock"] == "graph_replay" and result.candidate.clock == "judge_graph", (clock, result.notes)
        assert "kernel_tap" in result.checks_run
        verdicts.append((result.stage, result.reward))
    assert verdicts[0] == verdicts[1]


def test_a_forward_that_synchronises_is_timed_host_launched(warm_worker, tmp_path: Path) -> None:
    result = _evaluate(_workspace(tmp_path / "ws", SYNCS), warm_worker, tmp_path)
    assert result.stage == "timed" and not result.rules_fired, (result.stage, result.reason, result.notes)
    assert result.extra["judge_clock"]["clock"] == "host_launched"
    assert any("cannot be captured" in n for n in result.notes), result.notes


def test_a_capture_that_fails_inside_forward_leaves_the_host_launched_calls_ordered(warm_worker,
                                                                                     tmp_path: Path) -> None:
    """A read-back fails the capture half-way, and the kernel launches on the legacy default stream: the calls that
    follow must run on the stream they ran on before the capture (else the runner's output copy races the kernel)."""
    assert LEGACY_STREAM != (CASE.solution / "kernels" / "fused.cu").read_text()
    for run in range(2):
        result = _evaluate(_workspace(tmp_path / f"ws{run}", READS_BACK, LEGACY_STREAM), warm_worker, tmp_path)
        assert result.stage == "timed" and not result.rules_fired, (result.stage, result.reason, result.notes)
        assert result.extra["judge_clock"]["clock"] == "host_launched"


def test_a_graph_that_replays_wrong_turns_the_graph_clock_off_and_gains_nothing(warm_worker,
                                                                                 tmp_path: Path) -> None:
    result = _evaluate(_workspace(tmp_path / "ws", CAPTURES_OTHER_WORK), warm_worker, tmp_path)
    assert result.extra["judge_clock"]["clock"] == "host_launched", (result.stage, result.notes)
    assert any("did not reproduce forward" in n for n in result.notes), result.notes
    assert result.stage == "timed" and result.correct  # its host-launched calls are right, and timed as such


def test_replayed_calls_are_checked_like_any_other(warm_worker, tmp_path: Path) -> None:
    result = _evaluate(_workspace(tmp_path / "ws", kernel=WRONG_FROM_THE_SECOND_REPLAY), warm_worker, tmp_path)
    # right on the first input set's calls and wrong on fresh ones: refused as incorrect or, where the judge sees
    # that split, as seed_specialized (both -1)
    assert result.reward == -1, (result.stage, result.reason, result.notes)
    assert result.stage == "incorrect" or result.reason.startswith("seed_specialized"), (result.stage, result.reason)
    assert "warm-up" not in result.reason and "trial" not in result.reason, result.reason  # caught on a replay
