"""The named anti-cheat rules. Each name is what the agent sees when a rule fires; the text says what was wrong.

A rule firing makes the result incorrect (reward -1). The checks that fire them live in `cuda_agent.evaluator.checks`
and in the verification loop; each check carries a ``Rationale:`` comment naming the cheat it stops.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RULES: dict[str, str] = {
    "unwritten_output": "an output holds memory the candidate never wrote (a stale allocator block, not a result)",
    "input_mutation": "forward changed its inputs",
    "out_of_bounds_write": "a kernel wrote outside the bounds of a tensor (canary bytes around it were overwritten)",
    "foreign_stream": "work ran on a CUDA stream other than the caller's current stream (timers do not wait for it)",
    "background_thread": "a thread started by the candidate was still alive after forward returned",
    "lazy_output": "an output is not a plain, materialised torch.Tensor (a subclass, a lazy or deferred value)",
    "patched_trusted_function": "the candidate replaced a function the evaluator trusts (timers, synchronisation, "
    "comparison, torch functions or the dispatcher's kernels)",
    "dispatcher_mode_leak": "the candidate left a torch function/dispatch mode or global module hook installed",
    "forbidden_introspection": "the candidate inspected or altered the interpreter (frames, gc, tracing, raw memory)",
    "evaluator_access": "the candidate imported or touched the evaluator or the reference task module",
    "dynamic_code": "the candidate compiled or executed code at run time (exec/eval/compile)",
    "cached_output": "forward returned a result computed for earlier inputs (a cache keyed on addresses, ids or "
    "versions)",
    "lowered_precision": "the candidate computes in lower precision (fp16/bf16/TF32) than the task's fp32",
    "backend_flags_changed": "the candidate changed global backend flags (TF32, reduced-precision reductions, ...)",
    "torch_fallback": "forward falls back to the PyTorch reference (try/except fallback, inheriting or calling Model)",
    "torch_compute_in_forward": "strict mode: forward ran PyTorch compute ops; only allocation, views and the "
    "workspace's own kernels are allowed",
    "decoy_kernel": "none of the candidate's own kernels was launched during forward (compiled but never used)",
    "trivial_output": "the output only passes because the task's outputs are tiny; it does not track the reference",
    "shape_specialized": "the result is only correct for get_inputs' exact shapes",
    "seed_specialized": "the result is only correct for get_inputs' canonical seed",
    "distribution_specialized": "the result is only correct for get_inputs' value distribution",
    "audit_evasion": "the candidate behaves differently when audited than when timed",
    "below_speed_of_light": "the candidate was timed faster than the hardware can possibly run the task",
    "file_write": "candidate code wrote a file at run time (a module that would run unattributed, a cache across "
    "evaluations, a forged result)",
    "report_tampering": "a result reached the evaluator's caller from somewhere other than the evaluator (another "
    "process, a second report, or a replaced encoder): a forged verdict",
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
