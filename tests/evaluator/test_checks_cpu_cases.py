"""Every CPU case in tests/evaluator/cases/cpu: each honest candidate is accepted (the cheats are the adversarial
corpus's, tests/evaluator/test_adversarial_cpu.py). Runs real evaluations in forked worker processes (the warm worker)."""
from __future__ import annotations

import pytest

from cuda_agent.evaluator import EvalConfig, evaluate

from evalcases import Case, cpu_cases

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
