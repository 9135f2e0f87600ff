"""Unit tests of the judge/candidate split's parts: shared memory, the channel, buffers with canaries, the timing
cross-check, the kernel audit, perturbed construction, value encoding and the one-process filter."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cuda_agent.evaluator.judge import kernels, measure, memory
from cuda_agent.evaluator.judge.buffers import BufferSet, region_ids
from cuda_agent.evaluator.judge.session import Sample
from cuda_agent.evaluator.judge.values import encode
from cuda_agent.evaluator.runner import channel
from cuda_agent.evaluator.runner.perturb import perturbed_init
from cuda_agent.evaluator.runner.serve import decode_value
from cuda_agent.evaluator.runner.shm import SharedMemoryError, SharedRegion
from cuda_agent.errors import TaskError

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_shared_region_crosses_as_a_descriptor_and_bounds_views() -> None:
    region = SharedRegion.create(4096, "cpu")
    twin = SharedRegion.attach(os.dup(region.fd), region.nbytes, "cpu")
    a = region.view(512, [4, 8], [8, 1], torch.float32)
    b = twin.view(512, [4, 8], [8, 1], torch.float32)
    a.copy_(torch.arange(32, dtype=torch.float32).view(4, 8))
    assert torch.equal(b, a) and b.data_ptr() != a.data_ptr()
    with pytest.raises(SharedMemoryError):
        region.view(512, [2000], [1], torch.float32)  # past the end
    with pytest.raises(SharedMemoryError):
        region.view(100, [4], [1], torch.float32)  # unaligned
    twin.close()
    region.close()


def test_channel_carries_messages_and_descriptors() -> None:
    left, right = socket.socketpair()
    r, w = os.pipe()
    try:
        channel.send(left, {"op": "x", "n": float("inf"), "text": "é" * 10}, fds=[r])
        message, fds = channel.receive(right)
        assert message["op"] == "x" and message["n"] == float("inf") and len(fds) == 1
        os.write(w, b"z")
        assert os.read(fds[0], 1) == b"z"
        os.close(fds[0])
        left.sendall(b"\x05\x00\x00\x00[1,2")  # not an object, then cut short
        left.close()
        with pytest.raises(channel.WireError):
            channel.receive(right)
    finally:
        right.close()
        os.close(r)
        os.close(w)


def test_buffers_detect_out_of_bounds_writes_and_mutated_inputs() -> None:
    inputs = [torch.randn(3, 5), 7]
    bufset = BufferSet(inputs, [("out", torch.zeros(3, 5))], torch.device("cpu"), region_ids())
    bufset.load(inputs)
    out = bufset.outputs[0].view
    assert torch.isnan(out).all()  # poisoned until written
    assert bufset.broken_canaries() == [] and bufset.mutated_inputs(inputs) == []
    spec = bufset.call_spec(inputs, 1)
    assert spec["token"] == 1 and spec["args"][1] == {"v": 7} and spec["outs"][0][2] == [3, 5]
    slot = bufset.inputs[0]
    slot.region.flat[512 + slot.nbytes] = slot.region.flat[512 + slot.nbytes] ^ 1  # one byte past the input
    assert bufset.broken_canaries() == ["input 0"]
    slot.view[0, 0] += 1.0
    assert bufset.mutated_inputs(inputs) == ["input 0"]
    assert bufset.matches([torch.randn(3, 5), 7]) and not bufset.matches([torch.randn(4, 5), 7])
    bufset.close()


def _requests(spans_ms: list[float], calls: int, label: str = "request", reported: float = 1.0,
              graph: bool = False) -> list[Sample]:
    return [Sample(label, span, calls, reported, graph=graph) for span in spans_ms]


def test_replayed_requests_subtract_the_null_graphs_span_not_the_host_launched_one() -> None:
    """The null spans of host-launched requests include K launches from Python; a replay's do not. Subtracting the
    wrong kind would take the host's launch cost off a replay's device time (or leave it on a host-launched one)."""
    host_null = _requests([0.900 + 0.002 * (i % 3) for i in range(8)], 16, "null")
    graph_null = _requests([0.100 + 0.002 * (i % 3) for i in range(8)], 16, "null", graph=True)
    replays = _requests([0.102 + 16 * 0.020] * 6, 16, graph=True)  # 16 calls of 20 us
    stats = measure.judge_times(replays, host_null + graph_null, cuda=True)
    assert stats.median_ms == pytest.approx(0.020, rel=0.01) and stats.clock == "judge_graph"
    launched = measure.judge_times(_requests([0.902 + 16 * 0.020] * 6, 16), host_null + graph_null, cuda=True)
    assert launched.median_ms == pytest.approx(0.020, rel=0.01) and launched.clock == "judge"
    assert measure.null_spans(host_null + graph_null, 16, True) == [n.wall_ms for n in graph_null]


def test_judge_times_are_the_span_less_the_null_span_over_the_calls_and_ignore_reports() -> None:
    null = _requests([0.300 + 0.002 * (i % 3) for i in range(12)], 32, "null")
    spans = [0.302 + 32 * 0.010 + 0.003 * (i % 5) for i in range(10)]  # 32 calls of 10 us
    honest = measure.judge_times(_requests(spans, 32), null, cuda=True)
    assert honest.median_ms == pytest.approx(0.010, rel=0.03) and honest.clock == "judge"
    forged = measure.judge_times(_requests(spans, 32, reported=0.0001), null, cuda=True)
    assert forged.median_ms == honest.median_ms  # what the candidate reports decides nothing
    assert measure.reported_per_call_ms(_requests(spans, 32, reported=0.32)) == pytest.approx(0.01)


def test_batch_size_targets_the_request_span_in_powers_of_two() -> None:
    cpu = torch.device("cpu")
    target = measure.TARGET_REQUEST_MS
    assert measure.batch_size(0.001, 1 << 20, cpu) == measure.MAX_BATCH
    k = measure.batch_size(target / 10, 1 << 20, cpu)
    assert k == 8  # a power of two with k calls within the target and 2k beyond it
    assert measure.batch_size(target * 1.5, 1 << 20, cpu) == 1
    assert measure.batch_size(float("nan"), 1 << 20, cpu) == measure.MAX_BATCH


class _RowNorm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, x.shape[1:])


class _Opaque(torch.nn.Module):
    """Work the speed-of-light counters cannot follow (a tensor's data read in Python)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("no estimate of this")


def test_k0_follows_the_tasks_floor_not_the_references_time() -> None:
    # The H200 case (2026-12-04): a LayerNorm whose eager reference takes 8 ms while the floor (one read and one
    # write of the data at 4.8 TB/s) is about 30 times less. K from the reference's time over 8 was 1; a request
    # then held one 0.25 ms kernel and 0.1-0.2 ms of hand-over jitter.
    from cuda_agent.evaluator.speed_of_light import spec_for_name

    h200 = spec_for_name("H200")
    assert h200 is not None
    x = torch.rand(16, 1024, 256)
    floor = measure.fastest_call_ms(_RowNorm(), [x], h200, reference_ms=8.0)
    data_bytes = 2 * x.numel() * 4
    assert floor == pytest.approx(data_bytes / (h200.mem_bandwidth_gbs * 1e6), rel=0.05)
    cpu = torch.device("cpu")
    k = measure.batch_size(floor, 0, cpu)
    assert k * floor <= measure.TARGET_REQUEST_MS < 2 * k * floor or k == measure.MAX_BATCH
    assert k >= 16 * measure.batch_size(8.0 / measure.ASSUMED_SPEEDUP, 0, cpu)
    # never above the reference's own time (an estimate that overshoots would shrink K), and without an estimate
    # the reference's time over ASSUMED_SPEEDUP
    assert measure.fastest_call_ms(_RowNorm(), [x], h200, reference_ms=floor / 4) == floor / 4
    assert measure.fastest_call_ms(_Opaque(), [x], h200, reference_ms=8.0) == 8.0 / measure.ASSUMED_SPEEDUP


def _inventory(calls: dict[str, list[dict]]) -> dict:
    return {"ok": True, "tap": True, "calls": calls}


COPY = {"name": "Memcpy DtoD", "kind": "memcpy", "op": "aten::copy_", "dur_us": 1.0}


def test_kernel_audit_attributes_by_operator_not_by_name() -> None:
    own = ("void linear<64>(float const*, float*, long)", "softmax_kernel(float const*, float*, int)")
    honest = _inventory({
        "1": [{"name": "void linear<64>(float const*, float*, long)", "kind": "kernel", "op": ""},
              {"name": "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n", "kind": "kernel", "op": ""}],  # cuBLAS from own C++
        "copy:1": [COPY]})
    assert kernels.audit(honest, [1], own, strict=True, expect_copies=True).rules == []
    torch_mm = _inventory({"1": [{"name": "sm90_xmma_gemm_f32f32", "kind": "kernel", "op": "aten::mm"},
                                 {"name": "softmax_kernel(float const*, float*, int)", "kind": "kernel", "op": ""}],
                           "copy:1": [COPY]})
    rules = [r for r, _ in kernels.audit(torch_mm, [1], own, strict=True, expect_copies=True).rules]
    assert rules == ["torch_compute_in_forward"]
    assert kernels.audit(torch_mm, [1], own, strict=False, expect_copies=True).rules == []  # relaxed allows it
    zeros = _inventory({"1": [{"name": "void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>",
                               "kind": "kernel", "op": "aten::zero_"},
                              {"name": "softmax_kernel(float const*, float*, int)", "kind": "kernel", "op": ""}],
                        "copy:1": [COPY]})
    assert kernels.audit(zeros, [1], own, strict=True, expect_copies=True).rules == []


def test_kernel_audit_notes_unused_kernels_and_names_a_silenced_tap() -> None:
    own = ("my_kernel(float*)",)
    decoy = _inventory({"1": [{"name": "void at::native::reduce_kernel<512, 1>", "kind": "kernel",
                               "op": "aten::sum"}], "copy:1": [COPY]})
    relaxed = kernels.audit(decoy, [1], own, strict=False, expect_copies=True)
    assert relaxed.rules == [] and any("my_kernel" in n for n in relaxed.notes)  # KernelBench's rules: allowed
    strict = kernels.audit(decoy, [1], own, strict=True, expect_copies=True)
    assert [r for r, _ in strict.rules] == ["torch_compute_in_forward"]
    silenced = _inventory({"1": [{"name": "my_kernel(float*)", "kind": "kernel", "op": ""}]})  # no runner copy
    assert [r for r, _ in kernels.audit(silenced, [1], own, strict=True, expect_copies=True).rules] == \
        ["audit_evasion"]
    assert [r for r, _ in kernels.audit({"ok": True, "tap": False}, [1], own, strict=True,
                                        expect_copies=True).rules] == ["audit_evasion"]


def _replay_trace(kernels_run: list[str], launch: bool = True) -> list[dict]:
    """A profiler trace of one replayed request (first call 7): the graph launch inside the runner's range, then
    the kernels and the output copy the replay ran, correlated with that launch."""
    events = [{"cat": "user_annotation", "name": "ca_graph:7", "ts": 0, "dur": 10}]
    if launch:
        events.append({"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 2, "dur": 3, "args": {"correlation": 40}})
    events += [{"cat": "kernel", "name": name, "ts": 20 + 10 * i, "dur": 9, "args": {"correlation": 40, "stream": 7}}
               for i, name in enumerate(kernels_run)]
    events.append({"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "ts": 90, "dur": 1,
                   "args": {"correlation": 40, "stream": 7}})
    return events


FUSED = "fused_kernel(float const*, float*, long)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def test_a_replayed_requests_records_are_audited_under_its_first_call() -> None:
    from cuda_agent.evaluator.runner.tap import attribute

    honest = _inventory(attribute(_replay_trace([FUSED])))
    assert set(honest["calls"]) == {"graph:7"}
    assert kernels.audit(honest, [], (FUSED,), strict=True, expect_copies=True, replays=[(7, 2)]).rules == []
    rows = kernels.breakdown(honest, [7, 8], [(7, 2)])
    assert [(r["name"], r["total_us"]) for r in rows] == [(FUSED, 4.5)]  # 9 us over the request's 2 calls
    # a replay recorded without the runner's graph launch was not recorded as it ran (a tap switched off)
    silenced = _inventory(attribute(_replay_trace([FUSED], launch=False)))
    assert [r for r, _ in kernels.audit(silenced, [], (FUSED,), strict=True, expect_copies=True,
                                        replays=[(7, 2)]).rules] == ["audit_evasion"]


def test_pytorch_kernels_in_a_replay_count_unless_an_allowed_operator_launched_them_in_an_eager_call() -> None:
    """A replay's kernels have no operator above them. A fill that an eager call launched under ``aten::fill_``
    (zeros before an atomic sum) is allowed in the replay too; a PyTorch kernel seen only in replays is compute."""
    from cuda_agent.evaluator.runner.tap import attribute

    replay = attribute(_replay_trace([FILL, FUSED]))
    eager = {"1": [{"name": FILL, "kind": "kernel", "op": "aten::fill_"}, {"name": FUSED, "kind": "kernel", "op": ""}],
             "copy:1": [COPY]}
    with_eager = _inventory({**replay, **eager})
    assert kernels.audit(with_eager, [1], (FUSED,), strict=True, expect_copies=True, replays=[(7, 1)]).rules == []
    replay_only = _inventory(replay)
    assert [r for r, _ in kernels.audit(replay_only, [], (FUSED,), strict=True, expect_copies=True,
                                        replays=[(7, 1)]).rules] == ["torch_compute_in_forward"]


def test_only_plain_contiguous_tensor_outputs_are_captured() -> None:
    """The runner captures a request only where each output's copy replays as a plain memory copy (what the
    audit expects of a replay) of a tensor shaped like the reference's."""
    from cuda_agent.evaluator.runner.serve import _copy_out, _not_graphable

    outs = [torch.empty(4, 6)]
    assert _not_graphable(torch.ones(4, 6), _copy_out(torch.ones(4, 6), outs, torch.device("cpu"))) == ""
    transposed = torch.ones(6, 4).t()
    assert "contiguous" in _not_graphable(transposed, _copy_out(transposed, outs, torch.device("cpu")))
    assert "other than tensors" in _not_graphable((torch.ones(4, 6), 3), _copy_out((torch.ones(4, 6), 3), outs,
                                                                                   torch.device("cpu")))
    assert "shape" in _not_graphable(torch.ones(4, 5), _copy_out(torch.ones(4, 5), outs, torch.device("cpu")))


def test_perturbed_construction_is_identical_under_one_seed_and_breaks_constant_init() -> None:
    def build(perturb: bool) -> torch.nn.Module:
        torch.manual_seed(7)
        with perturbed_init(perturb):
            return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.GroupNorm(2, 4), torch.nn.LayerNorm(5))

    plain, first, second = build(False), build(True), build(True)
    assert torch.equal(plain[1].weight, torch.ones(4)) and torch.equal(plain[1].bias, torch.zeros(4))
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(first[1].weight, torch.ones(4)) and not torch.equal(first[2].bias, torch.zeros(5))
    assert torch.nn.init.ones_(torch.empty(3)).eq(1).all()  # restored after the block


def test_init_values_cross_as_data_only() -> None:
    values = [3, 2.5, float("inf"), (1, 2), [4, [5]], torch.float16, torch.arange(6).reshape(2, 3), "name", None]
    back = [decode_value(encode(v)) for v in values]
    assert back[:3] == [3, 2.5, float("inf")] and back[3] == (1, 2) and back[4] == [4, [5]]
    assert back[5] is torch.float16 and torch.equal(back[6], values[6]) and back[7:] == ["name", None]
    with pytest.raises(TaskError):
        encode(object())


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux's")
def test_the_candidate_process_cannot_fork_or_exec_but_can_thread() -> None:
    script = textwrap.dedent("""
        import os, threading, subprocess
        from cuda_agent.evaluator.runner.confine import confine_to_one_process
        assert confine_to_one_process()
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        for attempt in (lambda: os.fork(), lambda: subprocess.run(["true"]), lambda: os.execv("/bin/true", ["true"])):
            try:
                attempt()
                print("ESCAPED")
            except OSError as exc:
                print("refused", exc.errno)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0, done.stderr
    assert "ESCAPED" not in done.stdout and done.stdout.count("refused 1") == 3


def test_wait_readable_returns_when_data_arrives_and_gives_up_after_its_budget() -> None:
    import socket
    import time

    left, right = socket.socketpair()
    try:
        start = time.perf_counter()
        channel.wait_readable(right, 0.05, time.perf_counter)  # nothing arrives: about its budget, then returns
        assert 0.04 <= time.perf_counter() - start < 1.0
        channel.send(left, {"op": "x"})
        start = time.perf_counter()
        channel.wait_readable(right, 5.0, time.perf_counter)  # already readable: returns at once
        assert time.perf_counter() - start < 0.5
        assert channel.receive(right)[0] == {"op": "x"}
    finally:
        left.close()
        right.close()


def test_a_call_timed_below_the_clocks_resolution_is_taken_at_the_resolution() -> None:
    """An honest fast kernel whose requests came out shorter than the median null request (noise) is not timed at
    zero: it is taken at three robust deviations of the null spans over K, which the speed-of-light floor judges."""
    null = _requests([1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.8, 1.0], 8, "null")
    fast = measure.judge_times(_requests([0.95, 1.0, 0.97], 8), null, cuda=True)
    resolution = measure.resolution_ms([s.wall_ms for s in null], 8)
    assert resolution > 0 and fast.median_ms == pytest.approx(resolution)
    slow = measure.judge_times(_requests([9.0, 9.0, 9.0], 8), null, cuda=True)
    assert slow.median_ms == pytest.approx((9.0 - 1.0) / 8)
    # the diagnostics say how many timed requests the floor decided, and at what per-call time
    assert measure.clock_resolution(_requests([0.95, 1.0, 0.97], 8), null) == {"resolution_ms": resolution,
                                                                                "at_resolution": 3}
    assert measure.clock_resolution(_requests([9.0, 0.95, 9.0], 8), null)["at_resolution"] == 1
    assert measure.clock_resolution([], null) == {"resolution_ms": None, "at_resolution": 0}


def test_the_clocks_resolution_is_never_above_the_null_requests_own_span() -> None:
    """Null spans that scatter wider than they are long (half of them several milliseconds late) do not make a floor
    that replaces a measured time: the resolution is at most the null request's median span, over K."""
    null = _requests([0.8, 0.84, 0.85, 0.86, 9.0, 9.5, 10.0, 11.0], 1, "null")
    centre = (0.86 + 9.0) / 2
    assert measure.resolution_ms([s.wall_ms for s in null], 1) == pytest.approx(centre)  # 3 deviations: 18 ms
    timed = measure.judge_times(_requests([12.0, 12.1, 11.9], 1), null, cuda=True)
    assert timed.median_ms == pytest.approx(12.0 - centre)


def test_a_judge_out_of_memory_is_the_candidates_only_where_its_use_grew_past_its_share() -> None:
    gib = 1 << 30
    before = memory.DeviceUse(free=100 * gib, outside=2 * gib)
    hoard = memory.DeviceUse(free=gib // 2, outside=101 * gib)          # took all but half a GiB
    modest = memory.DeviceUse(free=40 * gib, outside=30 * gib)          # grew by 28 GiB: within its half
    assert "grew by 99.0 GiB of the 100.0 GiB free" in memory.candidates_fault(before, hoard)
    assert memory.candidates_fault(before, modest) == ""
    edge = memory.DeviceUse(free=0, outside=2 * gib + int(memory.CANDIDATE_SHARE * 100 * gib))
    assert memory.candidates_fault(before, edge) == ""                   # exactly the share is still allowed
    assert memory.candidates_fault(None, hoard) == memory.candidates_fault(before, None) == ""
    assert memory.device_use(torch.device("cpu")) is None


def test_the_reference_is_timed_as_a_candidate_and_scales_the_baselines(tmp_path) -> None:
    """The judge's clock for the baselines (`Evaluation._reference_on_judge_clock`): the task's own Model, submitted
    as the solution, is evaluated as a candidate (its own sandboxed process, the requests and clock of every
    candidate) and timed there; the ratio of that time to the reference's in-process time, measured together,
    scales both baselines (measured on the candidate's own clock); an implausible ratio is neither used
    nor cached, and too little time left skips it. Real sandbox and runner, on the CPU (host-launched requests
    there; the judge uses it on a GPU)."""
    import time

    from cuda_agent.evaluator import EvalConfig
    from cuda_agent.evaluator.judge.pipeline import Evaluation
    from cuda_agent.evaluator.stats import TimingStats
    from evalcases import resolve_task

    from dataclasses import replace

    from cuda_agent.evaluator.judge import pipeline, reference

    task = resolve_task("row_sum")
    cache = tmp_path / "cache"
    config = EvalConfig(device="cpu", mode="strict", timeout_s=120, baseline_cache_dir=str(cache))
    outer = Evaluation(task, tmp_path / "unused.py", config, time.monotonic() + 120)
    outer.batch = 4
    stats = outer._time_reference_as_candidate("batched")
    assert stats.median_ms > 0 and stats.n >= 5

    module = reference.load_task_module(task.code, "<row_sum>")
    ref_model = reference.build_model(module, 0, outer.device, reference.init_values(module))
    # a pair whose ratio is implausible (here: any, the limits set far away) is neither used nor cached
    limits = pipeline.CLOCK_FACTOR_LIMITS
    pipeline.CLOCK_FACTOR_LIMITS = (100.0, 200.0)
    try:
        outer._reference_on_judge_clock(ref_model, module, "batched")
    finally:
        pipeline.CLOCK_FACTOR_LIMITS = limits
    assert outer.reference_clock is None and "not used" in outer.state.notes[-1]
    assert not list(cache.rglob("*.json"))
    # a shared CPU's ratio can be anything (host-launched requests across processes against in-process calls):
    # the limits are the GPU's, tested above; here any ratio is taken
    pipeline.CLOCK_FACTOR_LIMITS = (1e-6, 1e6)
    deadline, allowance = outer.deadline, outer.allowance_left
    try:
        outer._reference_on_judge_clock(ref_model, module, "batched")
    finally:
        pipeline.CLOCK_FACTOR_LIMITS = limits
    assert outer.reference_clock is not None, outer.state.notes
    # the judge's own measurement: the deadline moved on by the time it took, out of the judge's allowance
    granted = outer.deadline - deadline
    assert granted > 0 and abs(outer.allowance_left - (allowance - granted)) < 1e-6
    judged, in_process = outer.reference_clock
    assert judged.median_ms > 0 and in_process.median_ms > 0
    assert in_process.n > 5  # more than the drift check's 5 (PAIR_REQUESTS within PAIR_TIME_CAP_S): a tighter interval
    assert len(list(cache.rglob("*.json"))) == 1 and outer.baselines_measured
    # the key names the pair's requests: pairs cached with fewer (before 2026-12-04's change) are measured again
    import json
    cached = json.loads(next(cache.rglob("*.json")).read_text())
    assert cached["meta"]["settings"]["pair_requests"] == pipeline.measure.PAIR_REQUESTS
    again = Evaluation(task, tmp_path / "unused.py", config, time.monotonic() + 120)
    again.batch = 4
    deadline = again.deadline
    again._reference_on_judge_clock(ref_model, module, "batched")  # from the cache: no second evaluation of the reference
    assert again.reference_clock[0] == judged and not again.baselines_measured
    assert again.deadline == deadline  # nothing measured: nothing added
    late = Evaluation(task, tmp_path / "unused.py", replace(config, baseline_cache_dir=str(tmp_path / "other"),
                                                             judge_allowance_s=0.0),
                      time.monotonic() + 8)  # too little time left to evaluate the reference as well, no allowance
    late.batch = 4
    late._reference_on_judge_clock(ref_model, module, "batched")
    assert late.reference_clock is None and "too few" in late.state.notes[-1]

    def timing(ms: float, spread: float = 0.0) -> TimingStats:
        return TimingStats(median_ms=ms, mean_ms=ms, std_ms=0.0, min_ms=ms, max_ms=ms, cv=0.0, n=5,
                           ci_low_ms=ms - spread, ci_high_ms=ms + spread)

    outer.reference_clock = (timing(2.5), timing(2.0))
    report: dict = {}
    assert outer._clock_factor(report) == pytest.approx(1.25)
    assert report["reference_judge_ms"] == 2.5 and report["reference_in_process_ms"] == 2.0
    # noisy medians: the low end of their confidence intervals (2.4 / 2.1), not the ratio of medians
    outer.reference_clock = (timing(2.5, 0.1), timing(2.0, 0.1))
    report = {}
    assert outer._clock_factor(report) == pytest.approx(2.4 / 2.1)
    assert report["clock_factor_point"] == pytest.approx(1.25)
    outer.reference_clock = None
    assert outer._clock_factor({}) == 1.0
