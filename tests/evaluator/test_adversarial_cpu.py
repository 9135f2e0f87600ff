"""The adversarial corpus on a CPU (tests/evaluator/cases/adversarial/cpu): every cheat is rejected (reward -1, with
the rule or stage its header names), leaks none of the secrets planted for it (host files, the judge's environment,
the caches, another workspace) and changes none of them. Real evaluations through a warm worker whose environment
holds the secrets. Known holes are xfail with the hole's description, so that fixing one shows up."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator import WarmWorker, evaluate
from cuda_agent.evaluator.rules import RULES

from adversarial_corpus import (AdversarialCase, Secrets, adversarial_cases, adversary_worker,  # noqa: F401
                                assert_blocked, case_param, eval_config, known_rule_or_stage, secrets)

CASES = adversarial_cases("cpu")
ALL_CASES = adversarial_cases()


@pytest.mark.slow
@pytest.mark.parametrize("case", [case_param(c) for c in CASES])
def test_adversarial_case_is_rejected(case: AdversarialCase, adversary_worker: WarmWorker,  # noqa: F811
                                      secrets: Secrets, tmp_path: Path,  # noqa: F811
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    baselines = tmp_path_factory.getbasetemp() / "adversarial-baselines"
    result = evaluate(case.load_task(), case.materialise(tmp_path), eval_config(case, baselines),
                      worker=adversary_worker, env=secrets.env_with_cache)
    assert_blocked(case, result, secrets)
    assert adversary_worker.alive


def test_catalogue() -> None:
    """Headers are well formed, every expectation names a real rule or stage, every rule has a case aimed at it, and
    the corpus is as large as issue 15 asks (60 cases, 10 native)."""
    assert len(ALL_CASES) >= 60 and sum(c.native for c in ALL_CASES) >= 10
    assert len({c.name for c in ALL_CASES}) == len(ALL_CASES)
    for case in ALL_CASES:
        assert known_rule_or_stage(case.expect), case.name
        if case.path.is_dir():
            entry = case.path / ("solution.py" if case.single_file else "model_new.py")
            assert entry.is_file() or entry.is_symlink(), case.name
    named = {one for c in ALL_CASES for one in c.expect.split("|")}
    assert set(RULES) <= named, f"rules no case aims at: {sorted(set(RULES) - named)}"
    native_builds = [c for c in CASES if c.native and c.single_file]
    assert len(native_builds) <= 6, "each CPU load_inline build takes about a minute: put more native cases in gpu/"


def test_unrewarded_among_alternatives() -> None:
    """A case expecting 'rule|unrewarded' is stopped when that rule rejects it or when it earns reward 1 at most
    (a switch point the run never reached), and not when it earns more; a plain rule still needs reward -1."""
    from cuda_agent.evaluator import EvalResult
    from cuda_agent.evaluator.rules import RuleViolation

    from adversarial_corpus import expectation_met, rejected

    caught = EvalResult(task_id="t", stage="rule_violation", correct=False, reward=-1,
                        rules_fired=(RuleViolation("lowered_precision", "probe"),))
    parity = EvalResult(task_id="t", stage="timed", correct=True, reward=1)
    gained = EvalResult(task_id="t", stage="timed", correct=True, reward=3)
    switch = "lowered_precision|incorrect|unrewarded"
    assert rejected(switch, caught) and expectation_met(switch, caught)
    assert rejected(switch, parity) and expectation_met(switch, parity)
    assert not rejected(switch, gained) and not expectation_met(switch, gained)
    assert not rejected("lowered_precision|incorrect", parity)
    assert rejected("unrewarded", parity) and not rejected("unrewarded", gained)
