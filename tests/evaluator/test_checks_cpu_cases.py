"""Every CPU case in tests/evaluator/cases/cpu: each honest candidate is accepted (the cheats are the adversarial
corpus's, tests/evaluator/test_adversarial_cpu.py). Runs real evaluations in forked worker processes (the warm worker)."""
from __future__ import annotations

import pytest

from cuda_agent.evaluator import EvalConfig, evaluate

from evalcases import CASES as CASES_DIR, Case, cpu_cases, resolve_task

CASES = cpu_cases()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_cpu_case(case: Case, warm_worker) -> None:
    result = evaluate(case.load_task(), case.solution, EvalConfig(mode=case.mode, profile=False, timeout_s=120),
                      worker=warm_worker)
    if case.expect == "correct":
        assert result.stage == "correct", (result.stage, result.reason, result.rule_names, result.log[-2000:])
        assert result.correct and result.reward == 1 and not result.rules_fired
        assert result.input_sets_checked >= 5
        assert {"fresh_inputs", "every_call_checked", "canaries", "input_mutation"} <= set(result.checks_run)
    else:
        assert case.expect in result.rule_names, (result.stage, result.reason, result.rule_names, result.log[-2000:])
        assert result.stage == "rule_violation"
        assert not result.correct and result.reward == -1 and result.continuous_reward == -1.0


@pytest.mark.slow
def test_the_result_says_how_near_the_precision_bound_a_candidate_came(warm_worker) -> None:
    """``extra["precision"]``: the elementwise task's floor (64 units), and each candidate's share of its bound,
    well under 1 for an honest rewrite, over 1 for the approximate tanh (the same numbers decide the verdict)."""
    task = resolve_task("tanh_gelu")
    config = EvalConfig(mode="relaxed", profile=False, timeout_s=120)
    honest = evaluate(task, CASES_DIR / "cpu" / "honest_tanh_gelu_sigmoid_form.py", config, worker=warm_worker)
    approx = evaluate(task, CASES_DIR / "adversarial" / "cpu" / "approx_tanh_gelu_cpu.py", config,
                      worker=warm_worker)
    assert honest.stage == "correct" and approx.rule_names == ("lowered_precision",), (honest.reason, approx.reason)
    mine, theirs = honest.extra["precision"], approx.extra["precision"]
    assert mine["floor_units"] == theirs["floor_units"] == 64.0 and mine["depth"] == "accumulation depth 1 (no contraction)"
    assert 0 < mine["every_call_headroom"] < 0.5 and 0 < mine["probe_headroom"] < 0.5
    assert theirs["every_call_headroom"] > 1.0
    assert mine["probe_outputs"] >= 2 and mine["probe_bound_units"] >= 64.0
