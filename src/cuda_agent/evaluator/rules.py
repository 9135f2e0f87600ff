"""The named anti-cheat rules. Each name is what the agent sees when a rule fires; the text says what was wrong.

A rule firing makes the result incorrect (reward -1). The checks that fire them live in the judge
(`cuda_agent.evaluator.judge`); each carries a ``Rationale:`` comment naming the cheat it stops. Torch-free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RULES: dict[str, str] = {
    "input_mutation": "forward changed its inputs",
    "out_of_bounds_write": "a kernel wrote outside the bounds of a tensor (canary bytes around it were overwritten)",
    "cached_output": "forward returned a result computed for earlier inputs (a cache keyed on addresses, ids or "
    "versions)",
    "lowered_precision": "the candidate computes in lower precision (fp16/bf16/TF32) than the task's fp32",
    "torch_compute_in_forward": "strict mode: forward ran PyTorch compute ops; only allocation, views and the "
    "solution's own kernels (and cuBLAS/cuDNN called from its own C++) are allowed",
    "trivial_output": "the output only passes because the task's outputs are tiny; it does not track the reference",
    "shape_specialized": "the result is only correct for get_inputs' exact shapes",
    "seed_specialized": "the result is only correct for get_inputs' canonical seed",
    "distribution_specialized": "the result is only correct for get_inputs' value distribution",
    "audit_evasion": "the kernel records of the candidate's process are missing or inconsistent with the work the "
    "evaluator itself did there (the kernel tap was switched off or its records altered)",
    "work_after_return": "the outputs changed after forward had answered (device work still running, or written "
    "later): results must be complete when forward returns",
    "below_speed_of_light": "the candidate was timed faster than the hardware can possibly write the task's outputs",
}


@dataclass(frozen=True)
class RuleViolation:
    """One rule that fired, with a detail saying where (which input set, op, thread, address, ...)."""

    rule: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown rule {self.rule!r}; known rules: {', '.join(sorted(RULES))}")

    @property
    def description(self) -> str:
        return RULES[self.rule]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RuleViolation":
        return cls(rule=data["rule"], detail=data.get("detail", ""))

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}" if self.detail else f"{self.rule}: {self.description}"
