"""Where the environment's build / verify / profile commands go: an `EvalBackend`.

Two backends: `LocalBackend` calls the builder and the evaluator in this process's machine (each evaluation still
runs in its own isolated subprocess, the evaluator's rule); `PoolBackend` hands the same work to a build/GPU pool.
The environment only sees `BuildSummary` and `Evaluation`, so it does not depend on which exists.

Verification needs CUDA. On a machine without a GPU (or with ``verify="skip"``) a backend still builds for real
but answers verify/profile with an `Evaluation` whose stage is ``skipped`` and whose message says so: an honest
"not checked", never a made-up result.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol

from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

EvalKind = Literal["verify", "profile"]
SKIPPED_MESSAGE = (
    "no GPU: verification skipped. CUDA is not available on this machine, so correctness and speed were not "
    "checked (the build above is real). Run on a GPU host to verify and profile."
)


@dataclass(frozen=True)
class BuildSummary:
    """The part of a build result the agent needs."""

    ok: bool
    seconds: float = 0.0
    compiled: tuple[str, ...] = ()
    diagnostics: str = ""
    log: str = ""

    @classmethod
    def from_result(cls, result: Any) -> "BuildSummary":
        return cls(
            ok=bool(result.ok),
            seconds=float(getattr(result, "seconds", 0.0) or 0.0),
            compiled=tuple(getattr(result, "compiled", ()) or ()),
            diagnostics=str(getattr(result, "diagnostics", "") or ""),
            log=str(getattr(result, "log", "") or ""),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"compiled": list(self.compiled)}

    def render(self) -> str:
        if self.ok:
            what = ", ".join(self.compiled) if self.compiled else "nothing (up to date)"
            return f"build OK in {self.seconds:.2f} s; compiled: {what}"
        return f"build FAILED after {self.seconds:.2f} s:\n{self.diagnostics or self.log or '(no compiler output)'}"


@dataclass(frozen=True)
class Evaluation:
    """One verify or profile outcome, as the environment tracks and shows it.

    ``correct`` is None when nothing was checked (stage ``skipped``); speedups are None when not timed.
    ``raw`` is the evaluator's own result (``EvalResult.to_dict()``) kept for the trajectory.
    """

    kind: EvalKind
    stage: str
    correct: bool | None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    reward: float | None = None
    rules_fired: tuple[str, ...] = ()
    message: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.stage == "skipped"

    @classmethod
    def skipped_result(cls, kind: EvalKind) -> "Evaluation":
        return cls(kind=kind, stage="skipped", correct=None, message=SKIPPED_MESSAGE)

    @classmethod
    def from_result(cls, result: EvalResult, kind: EvalKind) -> "Evaluation":
        """Read the evaluator's `EvalResult` (an answer that came over the wire as a dict: `EvalResult.from_dict`
        it first, so a malformed answer fails there, loudly, instead of reading as "incorrect")."""
        lines = [result.reason]
        lines += [f"rule {v.rule}: {v.detail}" for v in result.rules_fired if v.detail]
        if result.max_abs_error is not None:
            lines.append(f"max abs error: {result.max_abs_error:.3g}")
        if result.sol_fraction is not None:
            lines.append(f"{100 * result.sol_fraction:.1f}% of the speed-of-light floor ({result.sol_bound or 'bound'})")
        lines += _breakdown_lines(result)
        return cls(
            kind=kind,
            stage=result.stage,
            correct=result.correct,
            speedup_vs_eager=result.speedup_eager,
            speedup_vs_compile=result.speedup_compile,
            reward=float(result.reward),
            rules_fired=result.rule_names,
            message="\n".join(line for line in lines if line),
            raw=result.to_dict(),
        )

    @property
    def result(self) -> EvalResult | None:
        """The evaluator's result this evaluation was read from (None when nothing was evaluated)."""
        return EvalResult.from_dict(self.raw) if self.raw else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "correct": self.correct,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "reward": self.reward,
            "rules_fired": list(self.rules_fired),
            "message": self.message,
            "raw": dict(self.raw),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Evaluation":
        return cls(
            kind=data.get("kind", "profile"),
            stage=str(data.get("stage", "unknown")),
            correct=data.get("correct"),
            speedup_vs_eager=data.get("speedup_vs_eager"),
            speedup_vs_compile=data.get("speedup_vs_compile"),
            reward=data.get("reward"),
            rules_fired=tuple(data.get("rules_fired", ())),
            message=str(data.get("message", "")),
            raw=dict(data.get("raw", {})),
        )

    def render(self) -> str:
        """The text the agent reads."""
        if self.skipped:
            return f"{self.kind}: {self.message}"
        lines = [f"{self.kind}: stage={self.stage} correct={'yes' if self.correct else 'NO'}"]
        if self.rules_fired:
            lines.append("rules fired: " + ", ".join(self.rules_fired))
        if self.speedup_vs_eager is not None:
            lines.append(f"speedup vs eager PyTorch: {self.speedup_vs_eager:.3f}x")
        if self.speedup_vs_compile is not None:
            lines.append(f"speedup vs torch.compile: {self.speedup_vs_compile:.3f}x")
        if self.reward is not None:
            lines.append(f"reward: {self.reward:g}")
        if self.message:
            lines.append(self.message)
        return "\n".join(lines)


def _breakdown_lines(result: EvalResult, top: int = 8) -> list[str]:
    """The candidate's kernels and torch.compile's (the result's ``kernel_breakdown`` and
    ``compile_kernel_breakdown`` rows), slowest first, as the evaluator's `format_breakdown` tables."""
    from cuda_agent.evaluator.profile import format_breakdown_rows

    lines: list[str] = []
    for title, rows in (("your kernels per call:", result.kernel_breakdown),
                        ("torch.compile's kernels per call (the baseline to beat):", result.compile_kernel_breakdown)):
        text = format_breakdown_rows(rows, top=top)
        if text:
            lines += [title, *text.splitlines()]
    return lines


class EvalBackend(Protocol):
    """Builds and evaluates a workspace for the environment."""

    def build(self, workspace: Path) -> BuildSummary:
        """Compile the workspace's kernels; compiler errors come back in the summary, never raised."""
        ...

    def verify(self, task: Task, workspace: Path) -> Evaluation:
        """Check correctness (and the anti-cheat rules) of the workspace's solution."""
        ...

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> Evaluation:
        """Verify, then time the solution against eager PyTorch and torch.compile; ``breakdown`` adds the time of
        each of the candidate's kernels."""
        ...


def gpu_available() -> bool:
    from cuda_agent.compiler.toolchain import cuda_available

    return cuda_available()


def resolve_verify_mode(mode: str) -> Literal["gpu", "skip"]:
    """``auto`` becomes ``gpu`` when CUDA is available, else ``skip``."""
    if mode == "auto":
        return "gpu" if gpu_available() else "skip"
    if mode not in ("gpu", "skip"):
        raise ValueError(f"verify mode must be auto, gpu or skip, got {mode!r}")
    return mode  # type: ignore[return-value]


class LocalBackend:
    """Build with `cuda_agent.compiler.build_workspace`, evaluate with `cuda_agent.evaluator.evaluate`, on this machine.

    ``verify``: ``gpu`` evaluates on CUDA; ``skip`` reports "no GPU: verification skipped"; ``auto`` chooses.
    ``eval_config``: an `EvalConfig` for the evaluator (its defaults when None); the backend's build cache and
    architecture are passed on so the evaluator reuses the agent's builds. ``warm``: keep one warm evaluation
    worker (a fork server with torch imported) for the backend's life, so each evaluation starts in milliseconds;
    `close` stops it.
    """

    def __init__(
        self,
        *,
        verify: str = "auto",
        eval_config: EvalConfig | None = None,
        arch: str | None = None,
        cache_dir: Path | None = None,
        jobs: int | None = None,
        warm: bool = True,
    ) -> None:
        self.verify_mode = resolve_verify_mode(verify)
        self.eval_config = eval_config
        self.arch = arch
        self.cache_dir = cache_dir
        self.jobs = jobs
        self.warm = warm
        self._worker: Any | None = None

    def build(self, workspace: Path) -> BuildSummary:
        from cuda_agent.compiler.confined import build_confined

        result = build_confined(workspace, arch=self.arch, cache_dir=self.cache_dir, jobs=self.jobs)
        return BuildSummary.from_result(result)

    def verify(self, task: Task, workspace: Path) -> Evaluation:
        return self._evaluate(task, workspace, "verify")

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> Evaluation:
        return self._evaluate(task, workspace, "profile", breakdown)

    def _evaluate(self, task: Task, workspace: Path, kind: EvalKind, breakdown: bool = False) -> Evaluation:
        if self.verify_mode == "skip":
            return Evaluation.skipped_result(kind)
        from cuda_agent.evaluator import evaluate

        config = EvalConfig.for_kind(kind, self.eval_config, breakdown=breakdown)
        overrides: dict[str, Any] = {}
        if self.cache_dir is not None and config.build_cache_dir is None:
            overrides["build_cache_dir"] = str(self.cache_dir)
        if self.arch is not None and config.arch is None:
            overrides["arch"] = self.arch
        if overrides:
            config = dataclasses.replace(config, **overrides)
        return Evaluation.from_result(evaluate(task, workspace, config, worker=self._warm_worker()), kind)

    def _warm_worker(self) -> Any | None:
        if not self.warm:
            return None
        if self._worker is None:
            from cuda_agent.evaluator import WarmWorker

            self._worker = WarmWorker()
            self._worker.start()
        return self._worker

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


class PoolBackend:
    """Send builds and evaluations to a pool (`cuda_agent.pool.LocalPool`, `RayPool`, or an HTTP client with the
    same methods): ``pool.submit_build(workspace)`` and ``pool.submit(EvalJob(...))``, each returning a future."""

    def __init__(self, pool: Any, *, eval_config: EvalConfig | None = None, timeout_s: float | None = None) -> None:
        self.pool = pool
        self.eval_config = eval_config
        self.timeout_s = timeout_s

    def build(self, workspace: Path) -> BuildSummary:
        return BuildSummary.from_result(self.pool.submit_build(workspace).result(timeout=self.timeout_s))

    def verify(self, task: Task, workspace: Path) -> Evaluation:
        return self._evaluate(task, workspace, "verify")

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> Evaluation:
        return self._evaluate(task, workspace, "profile", breakdown)

    def _evaluate(self, task: Task, workspace: Path, kind: EvalKind, breakdown: bool = False) -> Evaluation:
        from cuda_agent.pool import EvalJob

        job = EvalJob.create(task, workspace, EvalConfig.for_kind(kind, self.eval_config, breakdown=breakdown),
                             kind=kind)
        answer = self.pool.submit(job).result(timeout=self.timeout_s)
        return Evaluation.from_result(answer if isinstance(answer, EvalResult) else EvalResult.from_dict(answer), kind)
