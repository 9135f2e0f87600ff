"""The evaluator: verify, audit, time and reward a candidate, each evaluation in its own process.

    from cuda_agent.evaluator import EvalConfig, evaluate, reward
    result = evaluate(task, "path/to/workspace", EvalConfig(mode="strict"))
"""
from cuda_agent.evaluator.api import evaluate, evaluate_in_process, make_job, prebuild
from cuda_agent.evaluator.config import EvalConfig, TOLERANCE_PRESETS
from cuda_agent.evaluator.isolation import WarmWorker, run_isolated
from cuda_agent.evaluator.result import STAGES, EvalResult, continuous, reward
from cuda_agent.evaluator.rules import RULES, RuleViolation

__all__ = [
    "EvalConfig",
    "EvalResult",
    "RULES",
    "RuleViolation",
    "STAGES",
    "TOLERANCE_PRESETS",
    "WarmWorker",
    "continuous",
    "evaluate",
    "evaluate_in_process",
    "make_job",
    "prebuild",
    "reward",
    "run_isolated",
]
