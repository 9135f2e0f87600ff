"""One contract, read the same way everywhere: the config a command kind gets, and how the agent and the benchmarks
read an `EvalResult` (correct means the same thing as it does to the reward)."""
from __future__ import annotations

import pytest

from cuda_agent.agent.backend import Evaluation
from cuda_agent.agent.best import paper_reward
from cuda_agent.bench.outcome import outcome_from_eval
from cuda_agent.errors import ConfigError
from cuda_agent.evaluator import EvalConfig, EvalResult, reward
from cuda_agent.evaluator.config import KINDS
from cuda_agent.evaluator.rules import RuleViolation
from cuda_agent.pool.job import JOB_KINDS


def test_verify_never_times_and_profile_breaks_down_only_when_asked() -> None:
    base = EvalConfig(mode="relaxed", kernel_breakdown=True)
    verify = EvalConfig.for_kind("verify", base, breakdown=True)
    assert (verify.profile, verify.kernel_breakdown, verify.mode) == (False, False, "relaxed")
    for kind in ("profile", "full"):
        assert EvalConfig.for_kind(kind).profile is True
        assert EvalConfig.for_kind(kind).kernel_breakdown is False
        assert EvalConfig.for_kind(kind, breakdown=True).kernel_breakdown is True
        assert EvalConfig.for_kind(kind, base).kernel_breakdown is True  # a config that asks keeps it
    assert EvalConfig.for_kind("profile", EvalConfig(profile=False)).profile is True
    with pytest.raises(ConfigError, match="verify"):
        EvalConfig.for_kind("timing")
    assert JOB_KINDS == KINDS


def test_a_fired_rule_is_incorrect_to_the_agent_the_benchmark_and_the_reward() -> None:
    """A result marked correct at a correct stage but with a rule fired must score as incorrect everywhere."""
    flagged = EvalResult(task_id="L1/1_x", stage="timed", correct=True, speedup_eager=2.0, speedup_compile=2.0,
                         rules_fired=(RuleViolation("cached_output", "same pointer"),), reward=3)
    assert reward(flagged) == -1
    outcome = outcome_from_eval(flagged)
    assert not outcome.correct and outcome.speedup_vs_compile is None and outcome.rules_fired == ("cached_output",)
    assert outcome.level == 1
    ev = Evaluation.from_result(flagged, "profile")
    assert ev.rules_fired == ("cached_output",) and "rule cached_output: same pointer" in ev.message
    assert ev.result == flagged


def test_the_agent_falls_back_to_the_evaluators_schedule_at_its_threshold() -> None:
    """An evaluation without a reward (written by hand, or by an older run) gets the evaluator's schedule: exactly
    5% faster is not faster."""
    def ev(eager: float, compiled: float) -> Evaluation:
        return Evaluation(kind="profile", stage="timed", correct=True, speedup_vs_eager=eager,
                          speedup_vs_compile=compiled)

    assert paper_reward(ev(1.05, 1.05)) == 1
    assert paper_reward(ev(1.0501, 1.05)) == 2
    assert paper_reward(ev(1.0501, 1.0501)) == 3
    assert paper_reward(Evaluation(kind="profile", stage="timed", correct=True, speedup_vs_eager=9.0,
                                   speedup_vs_compile=9.0, rules_fired=("cached_output",))) == -1
