"""Speed-of-light floors on small models, checked against hand counts; the GPU table; the floor checks."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from cuda_agent.evaluator.speed_of_light import (
    GpuSpec,
    SolEstimate,
    _spec_from_properties,
    cpu_spec,
    estimate,
    fraction_of_floor,
    gpu_spec,
    matmul_peak_tflops,
    spec_for_name,
)

H200 = spec_for_name("NVIDIA H200")
assert H200 is not None
MM_FP32 = max(67.0, 494.7 / 3, 989.4 / 9)  # TFLOP/s: three TF32 passes beat the SIMT fp32 peak on Hopper
BW = 4800.0  # GB/s


def _ms(flops: float, tflops: float) -> float:
    return flops / (tflops * 1e9)


def _mem_ms(nbytes: float) -> float:
    return nbytes / (BW * 1e6)


def test_linear_hand_count() -> None:
    model = torch.nn.Linear(64, 32)
    x = torch.randn(16, 64)
    sol = estimate(model, [x], None, H200)
    assert sol.matmul_flops == 2 * 16 * 64 * 32
    assert sol.elementwise_ops == 16 * 32
    assert sol.min_bytes == 4 * (16 * 64 + 64 * 32 + 32 + 16 * 32)
    assert sol.memory_ms == pytest.approx(_mem_ms(sol.min_bytes))
    assert sol.compute_ms == pytest.approx(max(_ms(2 * 16 * 64 * 32, MM_FP32), _ms(16 * 32, 67.0)))
    assert sol.floor_ms == max(sol.compute_ms, sol.memory_ms)
    assert sol.bound == "memory"
    assert sol.dtype == "float32" and sol.gpu == H200.name


def test_elementwise_is_not_free() -> None:
    x = torch.randn(1000)
    sol = estimate(torch.nn.ReLU(), [x], None, H200)
    assert sol.matmul_flops == 0
    assert sol.flops == 1000
    assert sol.min_bytes == 8000
    assert sol.compute_ms > 0 and sol.floor_ms == pytest.approx(_mem_ms(8000))


class _UsesTwoOfThree(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, unused: torch.Tensor) -> torch.Tensor:
        return a @ b


def test_only_bytes_actually_read_count() -> None:
    a, b, unused = torch.randn(8, 4), torch.randn(4, 2), torch.randn(100)
    sol = estimate(_UsesTwoOfThree(), [a, b, unused], None, H200)
    assert sol.min_bytes == 4 * (8 * 4 + 4 * 2 + 8 * 2)
    assert sol.matmul_flops == 2 * 8 * 4 * 2


class _HalfOfInput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :10] * 2


def test_a_slice_counts_only_its_bytes() -> None:
    sol = estimate(_HalfOfInput(), [torch.randn(4, 100)], None, H200)
    assert sol.min_bytes == 4 * (4 * 10 + 4 * 10)


def test_conv_hand_count() -> None:
    conv = torch.nn.Conv2d(3, 8, 3)
    x = torch.randn(2, 3, 10, 10)
    out_numel = 2 * 8 * 8 * 8
    sol = estimate(conv, [x], None, H200)
    assert sol.matmul_flops == 2 * out_numel * 3 * 3 * 3
    assert sol.min_bytes == 4 * (2 * 3 * 10 * 10 + 8 * 3 * 3 * 3 + 8 + out_numel)


def test_tf32_flags_lower_the_floor_only_for_their_op_class() -> None:
    conv = torch.nn.Conv2d(16, 16, 3)
    x = torch.randn(4, 16, 32, 32)
    conv_flops = 2 * (4 * 16 * 30 * 30) * 16 * 9
    strict = estimate(conv, [x], None, H200, allow_tf32=(False, False))
    conv_tf32 = estimate(conv, [x], None, H200, allow_tf32=(False, True))
    mm_tf32 = estimate(conv, [x], None, H200, allow_tf32=(True, False))
    assert strict.matmul_flops == conv_flops
    assert strict.compute_ms == pytest.approx(_ms(conv_flops, MM_FP32))
    assert conv_tf32.compute_ms == pytest.approx(_ms(conv_flops, 494.7))
    assert mm_tf32.compute_ms == strict.compute_ms
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    sol = estimate(_UsesTwoOfThree(), [a, b, torch.empty(0)], None, H200, allow_tf32=(True, False))
    assert sol.compute_ms == pytest.approx(_ms(2 * 64**3, 494.7))


def test_large_matmul_is_compute_bound() -> None:
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    sol = estimate(_UsesTwoOfThree(), [a, b, torch.empty(0)], None, H200)
    assert sol.bound == "compute"
    assert sol.compute_ms == pytest.approx(_ms(2 * 512**3, MM_FP32))
    assert sol.floor_ms == sol.compute_ms


def test_reduced_precision_task_uses_its_own_peaks() -> None:
    a, b = torch.randn(256, 256).half(), torch.randn(256, 256).half()
    sol = estimate(_UsesTwoOfThree(), [a, b, torch.empty(0, dtype=torch.half)], None, H200)
    assert sol.dtype == "float16"
    assert sol.compute_ms == pytest.approx(max(_ms(2 * 256**3, 989.4), _ms(256 * 256, 2 * 67.0)))
    assert sol.min_bytes == 2 * 3 * 256 * 256
    assert matmul_peak_tflops(H200, torch.float32) == pytest.approx(MM_FP32)


def test_given_outputs_are_used_for_writes() -> None:
    x = torch.randn(10)
    big_out = torch.randn(1000)
    sol = estimate(torch.nn.ReLU(), [x], big_out, H200)
    assert sol.min_bytes == 40 + 4000
    assert sol.elementwise_ops == 1000


@pytest.mark.parametrize(
    ("name", "bandwidth", "sms"),
    [
        ("NVIDIA H200", 4800.0, 132),
        ("NVIDIA H200 NVL", 4800.0, 132),
        ("NVIDIA GH200 480GB", 4900.0, 132),
        ("NVIDIA H100 80GB HBM3", 3350.0, 132),
        ("NVIDIA H100 PCIe", 2000.0, 114),
        ("NVIDIA H100 NVL", 3900.0, 132),
        ("NVIDIA H20", 4000.0, 78),
        ("NVIDIA A100-SXM4-80GB", 2039.0, 108),
        ("NVIDIA A100-PCIE-40GB", 1555.0, 108),
        ("NVIDIA L40S", 864.0, 142),
        ("NVIDIA L4", 300.0, 58),
        ("NVIDIA GeForce RTX 4090", 1008.0, 128),
        ("Tesla T4", 320.0, 40),
    ],
)
def test_table_lookup(name: str, bandwidth: float, sms: int) -> None:
    spec = spec_for_name(name)
    assert spec is not None
    assert (spec.mem_bandwidth_gbs, spec.sm_count) == (bandwidth, sms)
    assert spec.peak_fp16_tflops >= spec.peak_tf32_tflops >= spec.peak_fp32_tflops > 0


def test_unknown_name_and_property_fallback() -> None:
    assert spec_for_name("Some Future Accelerator") is None
    h100_like = SimpleNamespace(
        name="Mystery GPU", multi_processor_count=132, clock_rate=1_980_000, memory_clock_rate=2_619_000,
        memory_bus_width=5120, L2_cache_size=50 * 2**20,
    )
    spec = _spec_from_properties(h100_like)
    table = spec_for_name("NVIDIA H100 80GB HBM3")
    assert table is not None
    # A guessed spec errs generous, so the floor it gives is never above the table's.
    assert spec.peak_fp32_tflops >= 0.99 * table.peak_fp32_tflops
    assert spec.mem_bandwidth_gbs >= table.mem_bandwidth_gbs
    assert spec.peak_tf32_tflops >= table.peak_tf32_tflops and spec.peak_fp16_tflops >= table.peak_fp16_tflops
    assert spec.l2_bytes == 50 * 2**20


def test_gpu_spec_without_cuda_is_the_cpu_spec() -> None:
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    assert gpu_spec() == cpu_spec()
    assert gpu_spec("cpu").name == "cpu"


def test_fraction_of_floor() -> None:
    sol = SolEstimate(flops=1.0, min_bytes=1.0, compute_ms=0.5, memory_ms=1.0, floor_ms=1.0, bound="memory")
    assert fraction_of_floor(2.0, sol) == pytest.approx(0.5)
    assert fraction_of_floor(1.0, sol) == pytest.approx(1.0)
    assert fraction_of_floor(0.0, sol) == math.inf
    assert SolEstimate.from_dict(sol.to_dict()) == sol


def test_cpu_spec_floor_never_flags_real_cpu_work() -> None:
    """The CPU stand-in spec is generous: the eager time of real CPU work is always above its floor."""
    from cuda_agent.evaluator.timing import time_forward

    x = torch.randn(256, 256)
    model = _UsesTwoOfThree()
    sol = estimate(model, [x, x, x], None, cpu_spec())
    stats = time_forward(model, [[x, x, x]], warmup=1, reps=5)
    assert 0 < sol.floor_ms < stats.min_ms
    assert 0 < fraction_of_floor(stats.median_ms, sol) < 1
    assert isinstance(cpu_spec(), GpuSpec)
