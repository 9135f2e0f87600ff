"""Unit tests of the verification building blocks: config, result, the judge's comparison, the static hints,
input variants."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from cuda_agent.errors import ConfigError
from cuda_agent.evaluator import EvalConfig, EvalResult, RuleViolation, reward
from cuda_agent.evaluator.judge.compare import compare_outputs, tensors_equal
from cuda_agent.evaluator.judge.reference import fresh_seeds, load_task_module, scaled, shape_variant
from cuda_agent.evaluator.judge.static_hints import scan_source
from cuda_agent.evaluator.result import continuous, failure
from cuda_agent.evaluator.stats import TimingStats

from evalcases import CASES


def tol(_: str) -> tuple[float, float]:
    return (1e-2, 1e-2)


def test_config_validates_and_round_trips() -> None:
    with pytest.raises(ConfigError):
        EvalConfig(n_trials=4)
    with pytest.raises(ConfigError):
        EvalConfig(mode="lenient")
    with pytest.raises(ConfigError):
        EvalConfig.from_dict({"bogus": 1})
    cfg = EvalConfig(mode="relaxed", tolerance="tight", seed=3)
    assert EvalConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.tolerances("float32") == (1e-4, 1e-4)
    assert EvalConfig().tolerances("float32") == (1e-2, 1e-2)
    assert EvalConfig(atol=0.5).tolerances("float16")[0] == 0.5
    assert EvalConfig().tolerances("int64") == (0.0, 0.0)


def test_result_round_trip_and_reward() -> None:
    stats = TimingStats.from_samples([1.0, 1.1, 0.9])
    fast = TimingStats.from_samples([0.5, 0.5, 0.5])
    r = EvalResult(task_id="t", stage="timed", correct=True, eager=stats, compile=stats, candidate=fast,
                   speedup_eager=2.0, speedup_compile=2.0, rules_fired=())
    back = EvalResult.from_json(r.to_json())
    assert back == r
    assert reward(r) == 3 and continuous(r) == pytest.approx(2.0)
    drifted = replace(r, eager_paired=stats.scaled(1.02), baseline_drift=1.02,
                      compile_kernel_breakdown=({"name": "triton_poi_fused_0", "total_us": 1.5, "calls": 1},))
    assert EvalResult.from_json(drifted.to_json()) == drifted
    assert continuous(drifted) == pytest.approx(2.04)
    slow = EvalResult(task_id="t", stage="timed", correct=True, speedup_eager=1.2, speedup_compile=0.9)
    assert reward(slow) == 2
    bad = failure("t", "rule_violation", "x", rules_fired=(RuleViolation("input_mutation", "set 0"),))
    assert reward(bad) == -1 and EvalResult.from_dict(bad.to_dict()).rule_names == ("input_mutation",)
    with pytest.raises(ValueError):
        RuleViolation("not_a_rule")
    with pytest.raises(ValueError):
        EvalResult(task_id="t", stage="incorrect", correct=True)


def test_compare_structure_dtype_nan_and_tolerance() -> None:
    ref = torch.randn(4, 5)
    assert compare_outputs(ref.clone(), ref, tol).ok
    assert not compare_outputs(ref.double(), ref, tol).ok
    assert not compare_outputs(ref.reshape(5, 4), ref, tol).ok
    assert not compare_outputs((ref,), ref, tol).ok
    nan = ref.clone()
    nan[0, 0] = math.nan
    result = compare_outputs(nan, ref, tol)
    assert not result.ok and "NaN" in result.reason
    near = ref + 1e-3
    assert compare_outputs(near, ref, tol).ok
    far = ref.clone()
    far[1, 1] += 1.0
    assert not compare_outputs(far, ref, tol).ok
    both_nan = torch.tensor([math.nan, 1.0])
    assert compare_outputs(both_nan.clone(), both_nan, tol).ok
    assert not compare_outputs(torch.tensor([math.inf, 1.0]), both_nan, tol).ok


def test_compare_flags_tiny_references() -> None:
    ref = torch.randn(64) * 1e-4
    report = compare_outputs(torch.zeros(64), ref, tol)
    assert report.ok and report.leaves[0].reference_tiny and report.signal_rel_error > 0.5
    honest = compare_outputs(ref * (1 + 1e-6), ref, tol)
    assert honest.signal_rel_error < 1e-3


@pytest.mark.parametrize("kind", ["noise", "one_far", "overflow", "inf_both", "nan_cand", "half", "boundary"])
def test_fused_comparison_agrees_with_the_element_wise_one(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The few-pass comparison (one device read) and the element-wise one give the same verdict and measures; a
    small chunk makes the inputs span several chunks."""
    from cuda_agent.evaluator.judge import compare

    monkeypatch.setattr(compare, "_CHUNK", 1000)
    gen = torch.Generator().manual_seed(7)
    ref = torch.randn(4099, generator=gen)
    cand = ref + 1e-3 * torch.randn(4099, generator=gen)
    if kind == "one_far":
        cand[2500] += 1.0
    elif kind == "overflow":
        ref[10], cand[10] = 3e38, -3e38
    elif kind == "inf_both":
        ref[3000] = cand[3000] = math.inf
    elif kind == "nan_cand":
        cand[999] = math.nan
    elif kind == "half":
        ref, cand = ref.half(), cand.half()
    elif kind == "boundary":
        cand = ref + (1e-2 + 1e-2 * ref.abs()) * torch.where(torch.arange(4099) % 2 == 0, 0.999, 1.001)
    c, r = cand.reshape(-1), ref.reshape(-1)
    fused = compare.compare_tensor("out", cand, ref, 1e-2, 1e-2)
    exact = compare._leaf_report("out", c.numel(), 1e-2, 1e-2,
                                 **compare._exact_sums(c, r, torch.float32, 1e-2, 1e-2))
    assert fused.ok == exact.ok and fused.mismatches == exact.mismatches
    assert fused.max_abs == pytest.approx(exact.max_abs, rel=1e-6)
    assert fused.signal_rel_error == pytest.approx(exact.signal_rel_error, rel=1e-6, nan_ok=True)
    assert fused.reference_tiny == exact.reference_tiny
    expect_ok = kind in ("noise", "inf_both", "half")
    assert fused.ok is expect_ok, fused.reason
    if kind == "boundary":
        assert fused.mismatches == 2049  # the odd positions, just outside the tolerance


def test_fused_comparison_measures_the_spread_of_near_constant_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs of 1000 +- 1e-3: sum(x^2) - n*mean^2 cancels in fp32; the per-chunk var_mean does not, so a constant
    answer is still seen to carry none of the output's variation."""
    from cuda_agent.evaluator.judge import compare

    monkeypatch.setattr(compare, "_CHUNK", 1000)
    ref = 1000.0 + 1e-3 * torch.randn(4099, generator=torch.Generator().manual_seed(3))
    report = compare.compare_tensor("out", torch.full_like(ref, float(ref.mean())), ref, 1e-2, 1e-2)
    assert report.ok and report.reference_tiny
    assert report.signal_rel_error == pytest.approx(1.0, rel=0.05)
    honest = compare.compare_tensor("out", ref + 1e-5 * torch.randn(4099), ref, 1e-2, 1e-2)
    assert honest.signal_rel_error < 0.05


def test_fused_comparison_skips_work_for_identical_values() -> None:
    ref = torch.randn(100)
    report = compare_outputs(ref.clone(), ref, tol)
    assert report.ok and report.max_abs == 0 and report.signal_rel_error == 0



def test_fingerprint_matches_the_same_result_only() -> None:
    """The evidence behind cached_output for every earlier call: equal for a copy of an output (any dtype, layout,
    nesting), different when one element or one non-tensor leaf differs."""
    from cuda_agent.evaluator.judge.compare import fingerprint

    out = (torch.randn(300, 70), [torch.arange(5), 3])
    copy = (out[0].clone(), [out[1][0].clone(), 3])
    assert fingerprint(out) == fingerprint(copy)
    nudged = out[0].clone()
    nudged[123, 45] = torch.nextafter(nudged[123, 45], torch.tensor(math.inf))
    assert fingerprint((nudged, out[1])) != fingerprint(out)
    assert fingerprint((out[0], [out[1][0], 4])) != fingerprint(out)
    assert fingerprint(out[0].t()) == fingerprint(out[0].t().contiguous())
    for t in (torch.randn(3, dtype=torch.complex128), torch.ones(4, dtype=torch.bool), torch.randn(6).bfloat16()):
        assert fingerprint(t) == fingerprint(t.clone())


def test_tensors_equal_is_bitwise() -> None:
    a = torch.tensor([0.0, math.nan])
    assert tensors_equal(a, a.clone())
    assert not tensors_equal(torch.tensor([0.0]), torch.tensor([-0.0]))



@pytest.mark.parametrize("source, rule", [
    ("from model import Model\n", "torch_fallback"),
    ("import gc\n", "forbidden_introspection"),
    ("import threading\n", "background_thread"),
    ("import cuda_agent.evaluator\n", "evaluator_access"),
    ("exec('1')\n", "dynamic_code"),
    ("import torch.utils.data.dataloader as d\nm = d.threading._sys.modules\n", "forbidden_introspection"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "backend_flags_changed"),
    ("import torch\ntorch.cuda.synchronize = lambda: None\n", "patched_trusted_function"),
    ("import torch\ns = torch.cuda.Stream()\n", "foreign_stream"),
    ("class ModelNew:\n    def forward(self, x):\n        try:\n            return f(x)\n        except Exception:\n"
     "            return x\n", "torch_fallback"),
    ("import torch\nclass ModelNew:\n    def forward(self, x):\n        return torch.matmul(x, x)\n",
     "torch_compute_in_forward"),
    ("import torch.nn.functional as F\nclass ModelNew:\n    def forward(self, x):\n        return F.linear(x, x)\n",
     "torch_compute_in_forward"),
    ("class ModelNew:\n    def forward(self, x):\n        return x.half()\n", "lowered_precision"),
])
def test_static_pass_names_the_rule(source: str, rule: str) -> None:
    hits = scan_source(source, strict=True, fp32_task=True)
    assert rule in {h.rule for h in hits}, hits


@pytest.mark.parametrize("call", ["_ext.matmul(x, x)", "fused.linear(x, w, b)", "fused.logsumexp(x, 1)",
                                  "ops.softmax(x, out)", "self.kernels.sum(x)"])
def test_static_pass_does_not_judge_a_method_by_its_name(call: str) -> None:
    """Issue 16: an extension function named like a PyTorch op is the solution's own; a receiver not shown to be
    torch decides nothing."""
    source = f"import torch\nclass ModelNew:\n    def forward(self, x, w=None, b=None, out=None):\n        return {call}\n"
    assert "torch_compute_in_forward" not in {h.rule for h in scan_source(source, strict=True, fp32_task=True)}


def test_static_pass_accepts_an_honest_workspace_model() -> None:
    source = ("import torch\nimport torch.nn as nn\nfrom binding import ops\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        out = torch.empty_like(x)\n        ops.relu(x.contiguous(), out)\n"
              "        return out.view(x.shape)\n")
    assert scan_source(source, strict=True, fp32_task=True) == []


def test_fresh_seeds_differ_every_call() -> None:
    assert fresh_seeds(5, None) != fresh_seeds(5, None)
    assert len(set(fresh_seeds(5, None))) == 5
    assert fresh_seeds(5, 1) == fresh_seeds(5, 1)


def test_shape_variant_changes_only_input_sizes() -> None:
    code = (CASES / "tasks" / "small_linear_relu.py").read_text()
    module = load_task_module(code, "small")
    variant = shape_variant(code, "small", module)
    assert variant is not None and variant.name == "batch_size" and variant.new != 16
    assert variant.module.get_init_inputs() == module.get_init_inputs()
    assert variant.module.get_inputs()[0].shape[0] == variant.new
    assert scaled([torch.ones(2), 3], 10.0)[0].sum().item() == pytest.approx(20.0)
    assert scaled([torch.ones(2)], -3.0)[0].sum().item() == pytest.approx(-6.0)
    assert scaled([torch.arange(3)], 10.0) is None
