"""The precision contract (`judge.precision`) on real torch computations: honest fp32 GEMMs, convolutions,
reductions and elementwise ops in other orders pass; TF32, fp16-operand and bf16 versions (rounded to nearest and
truncated) fail, on positive and on zero-mean data; every verdict the same on two fresh input draws. The GPU tests
run the lowered versions on real hardware (cuBLAS TF32, fp16 and bf16 GEMMs, cuDNN TF32)."""
from __future__ import annotations

import math

import pytest
import torch

from cuda_agent.evaluator.judge.depth import UNKNOWN
from cuda_agent.evaluator.judge.precision import (CONTRACT, FORMATS, FP32_UNIT, PrecisionContract, judge_precision,
                                                  margins, merge_verdicts, plan_zero_mean, round_mantissa)
from precision_variants import (LOWER, Task, Variant, conv_task, draw, gemm_task, hardware_variants, linear_task,
                                reduction_task, shortcut_task, unary_task, variants_for)

CPU = torch.device("cpu")
NO_SIGNATURE = PrecisionContract(signature=False)
GEMMS = [(64, 64, 64), (128, 1024, 128), (64, 4096, 64), (32, 16384, 32)]


def _run(task: Task, variant: Variant, seed: int, device: torch.device = CPU) -> tuple:
    """The variant's verdicts on the task's own inputs and on zero-mean inputs (fresh draws under ``seed``)."""
    d = draw(task, variant, seed, device)
    on_own = judge_precision(d.model, [d.own], None, device)
    on_zero = judge_precision(d.model, [], [d.zero], device, contract=NO_SIGNATURE) if d.zero is not None else None
    return on_own, on_zero


def _cases(tasks: list[Task]) -> list:
    return [pytest.param(t, v, id=f"{t.name}|{v.name}") for t in tasks for v in variants_for(t)]


GEMM_TASKS = [gemm_task(m, k, n, positive) for m, k, n in GEMMS for positive in (True, False)]
CONV_TASKS = [conv_task(True), conv_task(False), linear_task(True), linear_task(False)]


@pytest.mark.parametrize(("task", "variant"), _cases(GEMM_TASKS + CONV_TASKS))
def test_gemm_and_conv_lowered_fail_on_both_data_honest_pass(task: Task, variant: Variant) -> None:
    runs = [_run(task, variant, seed) for seed in (11, 12)]
    for on_own, on_zero in runs:
        assert on_own.checked and on_zero is not None and on_zero.checked
        if variant.honest:
            assert on_own.ok and on_zero.ok, (on_own.violations, on_zero.violations)
        else:
            # Each kind of data refuses it on its own: the task's inputs (magnitude or signature), and the zero-mean
            # inputs by the magnitude rule alone.
            assert not on_own.ok and not on_zero.ok, (on_own.errors, on_zero.errors)
            assert all(e.fired == "magnitude" for e in on_zero.errors)
    assert runs[0][0].ok == runs[1][0].ok and runs[0][1].ok == runs[1][1].ok


@pytest.mark.parametrize(("task", "variant"), _cases([reduction_task(rows=16), shortcut_task(),
                                                       unary_task("gelu", True, 1 << 18),
                                                       unary_task("gelu", False, 1 << 18),
                                                       unary_task("exp", True, 1 << 18),
                                                       unary_task("log", True, 1 << 18)]))
def test_reductions_shortcuts_and_elementwise_do_not_false_fire(task: Task, variant: Variant) -> None:
    for seed in (21, 22):
        on_own, on_zero = _run(task, variant, seed)
        if variant.honest:
            assert on_own.ok and (on_zero is None or on_zero.ok), (on_own.errors, on_zero and on_zero.errors)
        else:
            assert not (on_own.ok and (on_zero is None or on_zero.ok))


TANH_TASKS = [unary_task(op, positive, 1 << 18) for op in ("tanh", "gelu_tanh") for positive in (True, False)]


@pytest.mark.parametrize(("task", "variant"), _cases(TANH_TASKS))
def test_elementwise_approximate_tanh_refused_fast_math_exp_accepted(task: Task, variant: Variant) -> None:
    """tanh kept to 11, 12 or 14 bits (half precision, the hardware's tanh.approx as it measured on L1/88) is refused
    on the task's own inputs on every draw; fp32 formulas, the fast-math exponential's 2 ulp included, pass."""
    for seed in (31, 32):
        on_own, on_zero = _run(task, variant, seed)
        assert on_own.checked
        if variant.honest:
            assert on_own.ok and (on_zero is None or on_zero.ok), (on_own.errors, on_zero and on_zero.errors)
            assert max(e.units for e in on_own.errors) < CONTRACT.min_floor_units / 8
        else:
            assert not on_own.ok, on_own.errors


def test_the_elementwise_floor_closes_what_the_flat_floor_let_through() -> None:
    """L1/88 on torch.rand data: tanh to 12 bits errs by about 335 units, under the old flat floor (512, what an
    unknown depth still gets) and above the elementwise one (64): the reason the floor follows the depth."""
    task = unary_task("gelu_tanh", True, 1 << 18)
    variant = next(v for v in variants_for(task) if v.name.startswith("tanh to 12 bits"))
    d = draw(task, variant, 41)
    flat = judge_precision(d.model, [d.own], None, CPU, depth=UNKNOWN)
    traced = judge_precision(d.model, [d.own], None, CPU)
    assert flat.ok and not traced.ok
    (error,) = traced.errors
    assert 100 < error.units < CONTRACT.floor_units and error.bound == pytest.approx(CONTRACT.min_floor_units * FP32_UNIT)
    assert "accumulation depth 1 (no contraction)" in traced.violations[0]


def test_positive_data_needs_the_signature_for_tf32_and_fp16() -> None:
    """Rationale for rule 2: on torch.rand at K = 4096 a TF32/fp16-operand GEMM's error is below the magnitude floor
    (and within a few times an honest sequential fp32 kernel's), so only the signature refuses it there."""
    task = gemm_task(64, 4096, 64, True)
    gen = torch.Generator().manual_seed(5)
    model = task.make_model()
    a, b = task.make_inputs(gen)
    tf32 = [LOWER["tf32 nearest"](a) @ LOWER["tf32 nearest"](b)]
    magnitude_only = judge_precision(model, [([a, b], tf32)], None, CPU, contract=NO_SIGNATURE)
    full = judge_precision(model, [([a, b], tf32)], None, CPU)
    assert magnitude_only.ok and not full.ok
    hit = full.errors[0]
    assert hit.fired == f"signature: {FORMATS[0].name}"
    sig = next(s for s in hit.signatures if s.format == FORMATS[0].name)
    assert sig.corr > 0.95 and 0.9 < sig.slope < 1.1
    assert full.violations and "rounding error of tf32/fp16" in full.violations[0]


def test_sign_detecting_tf32_is_refused_by_the_signature() -> None:
    """A candidate that computes exactly whenever an input is negative (the zero-mean calls) and rounds its operands
    to TF32 otherwise; and one that rounds only one operand (half the error): both refused on the task's own
    inputs."""
    task = gemm_task(64, 4096, 64, True)
    tf32 = LOWER["tf32 nearest"]

    def detecting(m: torch.nn.Module, x: list[torch.Tensor]) -> list[torch.Tensor]:
        signed = any(bool((t < 0).any()) for t in x)
        return [x[0] @ x[1]] if signed else [tf32(x[0]) @ tf32(x[1])]

    half = Variant("tf32 on A only", False, lambda m, x: [tf32(x[0]) @ x[1]])
    for variant in (Variant("sign-detecting tf32", False, detecting), half):
        for seed in (41, 42):
            d = draw(task, variant, seed)
            verdict = judge_precision(d.model, [d.own], [d.zero] if d.zero is not None else None, CPU)
            assert not verdict.ok
            own = next(e for e in verdict.errors if e.call == "own call 0")
            assert own.fired.startswith("signature"), own
            zero = next(e for e in verdict.errors if e.call == "zero-mean call 0")
            assert variant is half or not zero.fired


def test_contract_bound_is_relative_to_the_fp32_unit_and_the_reference() -> None:
    assert CONTRACT.floor == pytest.approx(512 * 2.0 ** -24)
    assert CONTRACT.bound(0.0) == CONTRACT.floor
    assert CONTRACT.bound(1e-4) == pytest.approx(16e-4)


def test_one_call_of_each_kind_together_and_its_report() -> None:
    task = gemm_task(64, 1024, 64, True)
    gen = torch.Generator().manual_seed(3)
    model = task.make_model()
    own = task.make_inputs(gen)
    plan = plan_zero_mean(model, own)
    assert plan.centred == (0, 1) and not plan.note
    zero = plan.apply(task.make_inputs(gen))
    assert zero is not None and all(abs(float(x.mean())) < 1e-6 for x in zero)
    bf16 = LOWER["bf16 operands"]
    verdict = judge_precision(model, [(own, [bf16(own[0]) @ bf16(own[1])])],
                              [(zero, [bf16(zero[0]) @ bf16(zero[1])])], CPU)
    assert not verdict.ok and verdict.checked
    assert {e.call for e in verdict.errors} == {"own call 0", "zero-mean call 0"}
    assert all(e.fired for e in verdict.errors) and len(verdict.violations) == 2
    zero_err = next(e for e in verdict.errors if e.call == "zero-mean call 0")
    assert zero_err.units > 8 * CONTRACT.floor_units and zero_err.ratio > 1000


def test_calls_judged_apart_merge_to_the_verdict_of_judging_them_together() -> None:
    """The judge keeps a large call's verdict instead of its tensors (judged at once during the run): merged with
    the calls judged after the run, the verdict is the one of judging them all together, under the calls' own
    names."""
    task = gemm_task(64, 1024, 64, True)
    gen = torch.Generator().manual_seed(5)
    model = task.make_model()
    bf16 = LOWER["bf16 operands"]
    honest = task.make_inputs(gen)
    honest_call = (honest, [honest[0] @ honest[1]])
    lowered = task.make_inputs(gen)
    lowered_call = (lowered, [bf16(lowered[0]) @ bf16(lowered[1])])
    together = judge_precision(model, [honest_call, lowered_call], None, CPU)
    apart = merge_verdicts([judge_precision(model, [honest_call], None, CPU, labels=["call 3"]),
                            judge_precision(model, [lowered_call], None, CPU, labels=["call 41"])])
    assert not together.ok and not apart.ok and apart.checked
    assert len(apart.violations) == len(together.violations) == 1 and "call 41" in apart.violations[0]
    assert [e.call for e in apart.errors] == ["call 3", "call 41"]
    assert [e.fired for e in apart.errors] == [e.fired for e in together.errors]
    clean = merge_verdicts([judge_precision(model, [honest_call], None, CPU)])
    assert clean.ok and clean.checked and not clean.violations
    nothing = merge_verdicts([])
    assert nothing.ok and not nothing.checked


def test_nothing_kept_and_no_float64_kernel_are_unchecked_not_refused() -> None:
    model = gemm_task(8, 8, 8, True).make_model()
    empty = judge_precision(model, [], None, CPU)
    assert empty.ok and not empty.checked and empty.notes

    class NoDouble(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.dtype == torch.float64:
                raise RuntimeError("no float64 kernel")
            return x * 2

    x = torch.rand(64)
    verdict = judge_precision(NoDouble(), [([x], [x * 2])], None, CPU)
    assert verdict.ok and not verdict.checked and "float64" in verdict.notes[0]


def test_tf32_flags_restored_and_reference_untouched() -> None:
    model = conv_task(True).make_model()
    before = [p.detach().clone() for p in model.parameters()]
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        x = torch.rand(2, 16, 20, 20)
        judge_precision(model, [([x], [model(x).detach()])], None, CPU)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    assert all(p.dtype == torch.float32 and torch.equal(p, q) for p, q in zip(model.parameters(), before))


# -- zero-mean inputs -------------------------------------------------------------------------------------------------
class LogThenLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(32, 16)

    def forward(self, positive: torch.Tensor, signed: torch.Tensor, index: torch.Tensor, scale: float) -> torch.Tensor:
        return self.linear(torch.log(positive) + signed)[index] * scale


def test_zero_mean_plan_keeps_undefined_inputs_and_indices() -> None:
    model = LogThenLinear()
    inputs = [torch.rand(64, 32) + 0.5, torch.rand(64, 32), torch.randint(0, 64, (40,)), 3.0]
    plan = plan_zero_mean(model, inputs)
    assert plan.centred == (1,) and "input(s) 0" in plan.note and "not finite" in plan.note
    zero = plan.apply(inputs)
    assert zero is not None
    assert zero[0] is inputs[0] and zero[2] is inputs[2] and zero[3] == 3.0
    assert float(zero[1].min()) < 0 < float(zero[1].max()) and abs(float(zero[1].mean())) < 1e-6


@pytest.mark.parametrize("op", ["log", "sqrt", "pow"])
def test_zero_mean_plan_falls_back_to_own_inputs_where_undefined(op: str) -> None:
    fn = {"log": torch.log, "sqrt": torch.sqrt, "pow": lambda t: torch.pow(t, 1.5)}[op]

    class Undefined(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return fn(x)

    plan = plan_zero_mean(Undefined(), [torch.rand(4096) + 0.01])
    assert plan.centred == () and plan.apply([torch.rand(4096)]) is None
    assert "own inputs only" in plan.note


def test_zero_mean_plan_leaves_scalars_alone() -> None:
    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            return x * s

    plan = plan_zero_mean(Scale(), [torch.rand(256), torch.tensor(2.0)])
    assert plan.centred == (0,)


# -- the judge's rounding ---------------------------------------------------------------------------------------------
def test_round_mantissa_matches_torch_half_and_bfloat16() -> None:
    x = torch.randn(1 << 16) * torch.exp(torch.randn(1 << 16) * 3)
    x = x[(x.abs() > 1e-4) & (x.abs() < 6e4)]
    assert torch.equal(round_mantissa(x, 10, "nearest"), x.half().float())
    assert torch.equal(round_mantissa(x, 7, "nearest"), x.bfloat16().float())
    t = round_mantissa(x, 10, "truncate")
    assert bool((t.abs() <= x.abs()).all()) and float(((x - t).abs() / x.abs()).max()) < 2.0 ** -10
    special = torch.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0])
    assert torch.equal(round_mantissa(special, 7).isnan(), special.isnan())
    with pytest.raises(ValueError):
        round_mantissa(x.double(), 10)


def test_fp32_unit() -> None:
    assert FP32_UNIT == torch.finfo(torch.float32).eps / 2


# -- the GPU: lowered precision as the hardware computes it ----------------------------------------------------------
GPU_TASKS = [gemm_task(1024, 4096, 1024, True, "cuda"), gemm_task(1024, 4096, 1024, False, "cuda"),
             gemm_task(256, 16384, 256, True, "cuda"), conv_task(True, "cuda", 128, 8),
             conv_task(False, "cuda", 128, 8), linear_task(True, "cuda")]


@pytest.mark.gpu
@pytest.mark.parametrize(("task", "variant"), [pytest.param(t, v, id=f"{t.name}|{v.name}") for t in GPU_TASKS
                                               for v in [*variants_for(t)[:4], *hardware_variants(t)]])
def test_gpu_lowered_precision_refused_honest_accepted(task: Task, variant: Variant) -> None:
    device = torch.device("cuda")
    for seed in (31, 32):
        on_own, on_zero = _run(task, variant, seed, device)
        assert on_own.checked and on_zero is not None
        if variant.honest:
            assert on_own.ok and on_zero.ok, (on_own.errors, on_zero.errors)
        else:
            assert not on_zero.ok, on_zero.errors
            assert not on_own.ok, on_own.errors


def test_margins_report_the_share_of_the_bound_and_the_strongest_signature() -> None:
    """At K = 4096 on positive data a TF32 GEMM is under the floor (the magnitude rule lets it by) and its operand-
    rounding signature refuses it: the margins show both, and the honest product's share of its bound."""
    task = gemm_task(32, 4096, 64, True)
    model = task.make_model()
    own = task.make_inputs(torch.Generator().manual_seed(5))
    tf32 = LOWER["tf32 nearest"]
    honest = judge_precision(model, [(own, [own[0] @ own[1]])], [], CPU)
    lowered = judge_precision(model, [(own, [tf32(own[0]) @ tf32(own[1])])], [], CPU)
    fair, low = margins(honest), margins(lowered)
    assert honest.ok and 0 < fair["probe_headroom"] < 1 and fair["probe_worst_call"] == "own call 0"
    assert not lowered.ok and low["probe_headroom"] < 1, low  # refused by the signature, not by the size
    assert low["signature_format"].startswith("tf32") and low["signature_corr"] >= CONTRACT.min_corr
    assert fair["signature_corr"] < CONTRACT.min_corr and fair["probe_outputs"] == low["probe_outputs"] == 1
    assert margins(judge_precision(model, [], [], CPU)) == {}


@pytest.mark.parametrize("kind", ["fp32 rounding", "bf16 operands", "far off", "zeros"])
def test_rel_error_of_two_float32_tensors_matches_the_float64_computation(kind: str) -> None:
    """`rel_error` of two float32 tensors (the judge's check of every call against the fp32 reference) takes a
    float32 path (the difference in float32, squares summed in float64): it gives what widening both to float64
    gives, to 1e-6 of the error, from an fp32 reordering's error to a wrong result, across chunk boundaries."""
    from cuda_agent.evaluator.judge import precision

    gen = torch.Generator().manual_seed(11)
    ref = torch.randn(3 * precision._CHUNK // 2 + 7, generator=gen)
    cand = {"fp32 rounding": (ref.double() * (1 + 1e-7 * torch.randn(ref.shape, generator=gen).double())).float(),
            "bf16 operands": ref.bfloat16().float(),
            "far off": ref + torch.randn(ref.shape, generator=gen),
            "zeros": torch.zeros_like(ref)}[kind]
    fast = precision.rel_error(cand, ref)
    slow = precision.rel_error(cand, ref.double())  # the float64 path
    assert fast > 0 and fast == pytest.approx(slow, rel=1e-6)
    assert precision.rel_error(ref, ref) == 0.0
