"""Where the environment's build / verify / profile commands go: an `EvalBackend`.

Two backends: `LocalBackend` calls the builder and the evaluator in this process's machine (each evaluation still
runs in its own isolated subprocess, the evaluator's rule); `PoolBackend` hands the same work to a build/GPU pool.
The environment only sees `BuildSummary` and the evaluator's own `EvalResult` (the one verdict type from the judge
to a report), so it does not depend on which exists; `render_result` is where a verdict becomes the model's text.

Verification needs CUDA. On a machine without a GPU (or with ``verify="skip"``) a backend still builds for real
but answers verify/profile with an `EvalResult` whose stage is ``skipped`` and whose reason says so: an honest
"not checked", never a made-up result.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.tasks.task import Task

if TYPE_CHECKING:
    from cuda_agent.compiler.builder import BuildResult
    from cuda_agent.evaluator.isolation import WarmWorker
    from cuda_agent.pool.base import Pool

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
    def from_result(cls, result: "BuildResult") -> "BuildSummary":
        return cls(ok=result.ok, seconds=float(result.seconds), compiled=tuple(result.compiled),
                   diagnostics=result.diagnostics, log=result.log)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"compiled": list(self.compiled)}

    def render(self) -> str:
        if self.ok:
            what = ", ".join(self.compiled) if self.compiled else "nothing (up to date)"
            return f"build OK in {self.seconds:.2f} s; compiled: {what}"
        return f"build FAILED after {self.seconds:.2f} s:\n{self.diagnostics or self.log or '(no compiler output)'}"


def skipped_result(task: Task) -> EvalResult:
    """The answer of a backend that cannot verify here: stage ``skipped``, the schedule's incorrect reward, and a
    reason saying why (an honest "not checked", never a made-up verdict)."""
    return failure(task.id, "skipped", SKIPPED_MESSAGE)


def render_result(result: EvalResult, kind: EvalKind) -> str:
    """The text the agent reads for one ``verify`` or ``profile``: the only place an `EvalResult` becomes words for
    the model (stage, rules, speedups, reward, the reason, errors, the speed-of-light share, per-kernel times)."""
    if result.stage == "skipped":
        return f"{kind}: {result.reason}"
    lines = [f"{kind}: stage={result.stage} correct={'yes' if result.correct else 'NO'}"]
    if result.rules_fired:
        lines.append("rules fired: " + ", ".join(result.rule_names))
    if result.speedup_eager is not None:
        lines.append(f"speedup vs eager PyTorch: {result.speedup_eager:.3f}x")
    if result.speedup_compile is not None:
        lines.append(f"speedup vs torch.compile: {result.speedup_compile:.3f}x")
    lines.append(f"reward: {result.reward:g}")
    lines.append(result.reason)
    lines += [f"rule {v.rule}: {v.detail}" for v in result.rules_fired if v.detail]
    if result.max_abs_error is not None:
        lines.append(f"max abs error: {result.max_abs_error:.3g}")
    lines.append(result.precision_summary())
    if result.sol_fraction is not None:
        lines.append(f"{100 * result.sol_fraction:.1f}% of the speed-of-light floor ({result.sol_bound or 'bound'})")
    lines += _breakdown_lines(result)
    return "\n".join(line for line in lines if line)


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
    """Builds and evaluates a workspace for the environment.

    ``verify_mode`` says what the verdicts are: ``gpu`` (the evaluator's), ``skip`` (nothing checked: every
    evaluation is a ``skipped`` result, and the episode's reward is unavailable) or a backend's own word for a
    documented stand-in."""

    verify_mode: str

    def build(self, workspace: Path) -> BuildSummary:
        """Compile the workspace's kernels; compiler errors come back in the summary, never raised."""
        ...

    def verify(self, task: Task, workspace: Path) -> EvalResult:
        """Check correctness (and the anti-cheat rules) of the workspace's solution."""
        ...

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> EvalResult:
        """Verify, then time the solution against eager PyTorch and torch.compile; ``breakdown`` adds the time of
        each of the candidate's kernels."""
        ...

    def close(self) -> None:
        """Release what the backend started (a warm worker); the pool or service behind it stays the caller's."""
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
        self._worker: WarmWorker | None = None

    def build(self, workspace: Path) -> BuildSummary:
        from cuda_agent.compiler.confined import build_confined

        result = build_confined(workspace, arch=self.arch, cache_dir=self.cache_dir, jobs=self.jobs)
        return BuildSummary.from_result(result)

    def verify(self, task: Task, workspace: Path) -> EvalResult:
        return self._evaluate(task, workspace, "verify")

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> EvalResult:
        return self._evaluate(task, workspace, "profile", breakdown)

    def _evaluate(self, task: Task, workspace: Path, kind: EvalKind, breakdown: bool = False) -> EvalResult:
        if self.verify_mode == "skip":
            return skipped_result(task)
        from cuda_agent.evaluator import evaluate

        config = EvalConfig.for_kind(kind, self.eval_config, breakdown=breakdown)
        overrides: dict[str, Any] = {}
        if self.cache_dir is not None and config.build_cache_dir is None:
            overrides["build_cache_dir"] = str(self.cache_dir)
        if self.arch is not None and config.arch is None:
            overrides["arch"] = self.arch
        if overrides:
            config = dataclasses.replace(config, **overrides)
        return evaluate(task, workspace, config, worker=self._warm_worker())

    def _warm_worker(self) -> "WarmWorker | None":
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
    """Send builds and evaluations to a pool (`cuda_agent.pool.LocalPool`, `RayPool`, or the HTTP `PoolClient`):
    ``pool.submit_build(workspace)`` and ``pool.submit(EvalJob(...))``, each returning a future. The pool belongs to
    the caller (several episodes share it), so `close` leaves it running."""

    verify_mode = "gpu"

    def __init__(self, pool: "Pool", *, eval_config: EvalConfig | None = None, timeout_s: float | None = None) -> None:
        self.pool = pool
        self.eval_config = eval_config
        self.timeout_s = timeout_s

    def build(self, workspace: Path) -> BuildSummary:
        return BuildSummary.from_result(self.pool.submit_build(workspace).result(timeout=self.timeout_s))

    def verify(self, task: Task, workspace: Path) -> EvalResult:
        return self._evaluate(task, workspace, "verify")

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> EvalResult:
        return self._evaluate(task, workspace, "profile", breakdown)

    def _evaluate(self, task: Task, workspace: Path, kind: EvalKind, breakdown: bool = False) -> EvalResult:
        from cuda_agent.pool import EvalJob

        job = EvalJob.create(task, workspace, EvalConfig.for_kind(kind, self.eval_config, breakdown=breakdown),
                             kind=kind)
        return self.pool.submit(job).result(timeout=self.timeout_s)

    def close(self) -> None:
        """Nothing to release: the pool is the caller's."""
