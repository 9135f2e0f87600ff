"""One contract, read the same way everywhere: the config a command kind gets, and how the agent and the benchmarks
read an `EvalResult` (correct means the same thing as it does to the reward)."""
from __future__ import annotations

import pytest

from cuda_agent.agent.backend import render_result
from cuda_agent.agent.best import BestKernel, is_candidate
from cuda_agent.bench.outcome import TaskOutcome
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
    outcome = TaskOutcome.from_result(flagged)
    assert not outcome.correct and outcome.speedup_vs_compile is None and outcome.rules_fired == ("cached_output",)
    assert outcome.level == 1
    assert not is_candidate(flagged) and "rule cached_output: same pointer" in render_result(flagged, "profile")


def test_the_agent_takes_the_evaluators_reward_and_never_recomputes_it() -> None:
    """The evaluator applied its schedule at its own threshold (exactly 5% faster is not faster): the agent's best
    kernel reports that reward as it is, and the reward of a result equals the schedule's at that threshold."""
    def timed(eager: float, compiled: float) -> EvalResult:
        result = EvalResult(task_id="t", stage="timed", correct=True, speedup_eager=eager, speedup_compile=compiled)
        return EvalResult(**{**result.__dict__, "reward": reward(result)})

    assert [BestKernel(timed(*s), 1).reward for s in ((1.05, 1.05), (1.0501, 1.05), (1.0501, 1.0501))] == [1, 2, 3]
