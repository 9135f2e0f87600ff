"""`EvalConfig`: every knob of one evaluation, frozen so that it can key caches and travel to a worker process."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from cuda_agent.errors import ConfigError

MODES = ("strict", "relaxed")
# What a command asks of the evaluator: "verify" checks correctness only; "profile" (the agent's command) and "full"
# (what the reward and the benchmarks use) verify and time. They are the pool's job kinds too.
KINDS = ("verify", "profile", "full")
MAX_TIMEOUT_S = 24 * 3600.0

# (atol, rtol) by dtype name. "paper" is the CUDA Agent paper's (and KernelBench's) 1e-2 for fp32.
TOLERANCE_PRESETS: dict[str, dict[str, tuple[float, float]]] = {
    "paper": {
        "float64": (1e-2, 1e-2), "float32": (1e-2, 1e-2), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2),
    },
    "tight": {
        "float64": (1e-7, 1e-7), "float32": (1e-4, 1e-4), "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3),
    },
    # KernelBench's evaluator today (get_tolerance_for_precision): 1e-4 for fp32, 1e-2 for the 16-bit types.
    "kernelbench": {
        "float64": (1e-4, 1e-4), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2),
    },
}


@dataclass(frozen=True)
class EvalConfig:
    """How to evaluate one candidate.

    Attributes:
        mode: 'strict' (all computation in the workspace's own kernels; cuBLAS/cuDNN only from the kernels' C++) or
            'relaxed' (PyTorch ops allowed beside custom kernels, as KernelBench allows).
        tolerance: a preset of TOLERANCE_PRESETS ('paper' or 'tight'); `atol`/`rtol`, when set, override it for
            every floating dtype.
        n_trials: the fewest checked calls before a candidate can be found correct (at least 5); every call is
            checked, each on fresh random inputs.
        variants: also check inputs from another distribution (scaled) and other shapes (size constants changed).
        precision_probe: compare with a float64 reference to expose lowered precision (fp16/bf16/TF32).
        profile: time eager, torch.compile and the candidate after a correct verification.
        kernel_breakdown: add a per-kernel time breakdown (GPU only; slower).
        runtime_audit: record the kernels each call launches (GPU only; the kernel tap, on for every call alike):
            decoy kernels, PyTorch compute in strict mode, a tap that was switched off.
        timeout_s: wall-clock limit of the whole evaluation (build included); past it the process group is killed.
            The judge's own first measurements of a task (`judge_allowance_s`) are added to it.
        judge_allowance_s: seconds the judge may add to ``timeout_s`` for its own first measurements of a task: the
            eager and torch.compile baselines and the reference timed on the judge's clock, cached after (the same
            task's later evaluations do not pay them). The candidate's code gets ``timeout_s`` whatever the judge
            measured first; the process's hard limit is ``timeout_s + judge_allowance_s``. 0: the judge's first
            measurements count against ``timeout_s``, and an evaluation that then runs out of time ends as the
            judge's ``eval_error`` (with ``extra["evaluate_again"]``), never as the candidate's timeout.
        warmup: requests (of K0 calls each, K0 fixed from the reference's time) before timing starts (at least 1
            is always untimed: the candidate's first call may compile or allocate).
        reps: the timed calls wanted; the timed requests are reps / K, between 5 and 30, fewer when
            ``timing_budget_s`` of the reference's time would be spent first (never fewer than 5). The number of
            requests is fixed before the candidate's code loads: no run ends early on what the candidate does.
        timing_budget_s: wall seconds the timed requests may take, judged on the reference's time (the judge's
            checks between them included).
        device: 'auto' (CUDA when present, else CPU), 'cpu', 'cuda' or 'cuda:N'.
        baseline_cache_dir: where eager/compile baseline times are cached (None: the default cache folder).
        build_cache_dir: the build's object cache (None: the build's default).
        arch: compute capability for the build (None: detect).
        speed_threshold: the reward's margin: "faster" means more than this fraction faster.
        seed: None draws fresh seeds from the OS every call (the default and the only safe setting); an int makes a
            run reproducible for debugging.
        sol_tolerance: a candidate timed below floor * sol_tolerance fires the speed-of-light rule.
        baseline_drift_limit: eager PyTorch is timed again on the candidate's own timing inputs, and the cached
            baselines are scaled by how much slower or faster it ran now, by at most this fraction either way
            (0 turns the re-timing off). This cancels drift between evaluations (clocks, where the inputs landed
            in memory); the cap bounds what a candidate could gain by slowing the re-timed reference.
        max_log_chars: logs kept in the result are trimmed to this many characters.
        graph_clock: on a GPU, time the candidate and both baselines as replays of CUDA graphs captured on the
            judge's buffers (device work only, what Nsight Compute sums), where all three can be captured; off,
            or where one cannot, all three are timed with host-launched requests (host launch cost included).
        warm_device_ms: on a GPU, keep the device busy with the judge's own L2 flushes for about this long right
            before every request is sent (null and candidate alike), so that no request starts on a device that
            idled through the judge's cadence pad. 0 (the default, until measured): one flush before the pad.
            `benchmarks/idle_probe.py` and `timing_vs_ncu.py --warm-ms` measure whether it removes the 0.22-0.31 ms
            per request by which the judge's clock exceeded Nsight Compute on the H200 (2026-12-03).
        probe_stash_share: on a GPU, the share of the device's memory that the calls kept for the precision probe
            may hold; a call kept beyond it is judged at once (its verdict kept, not its tensors), or copied to host
            memory where the device has no room for that either (0: every kept call judged at once).
        reference_on_judge_clock: on a GPU, also time the task's reference as a candidate is timed (its own code
            submitted as the solution: a process of its own, the same requests and clock; once per task, cached
            beside the baselines) and scale both baselines by how much slower it ran there than in the judge's
            process, so that speedups compare like with like.
        unsandboxed_trusted_code: run the candidate without the sandbox. Only for code you wrote yourself: without
            the sandbox it reads the host's files and environment. Where no sandbox can be made and this is off,
            evaluation refuses (an error saying what is missing).
    """

    mode: str = "strict"
    tolerance: str = "paper"
    atol: float | None = None
    rtol: float | None = None
    n_trials: int = 5
    variants: bool = True
    precision_probe: bool = True
    profile: bool = True
    kernel_breakdown: bool = False
    runtime_audit: bool = True
    timeout_s: float = 300.0
    judge_allowance_s: float = 300.0
    warmup: int = 2
    reps: int = 50
    timing_budget_s: float = 2.0
    device: str = "auto"
    baseline_cache_dir: str | None = None
    build_cache_dir: str | None = None
    arch: str | None = None
    speed_threshold: float = 0.05
    seed: int | None = None
    sol_tolerance: float = 0.9
    baseline_drift_limit: float = 0.05
    max_log_chars: int = 4000
    graph_clock: bool = True
    warm_device_ms: float = 0.0
    probe_stash_share: float = 0.25
    reference_on_judge_clock: bool = True
    unsandboxed_trusted_code: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"EvalConfig.mode must be one of {MODES}, got {self.mode!r}")
        if self.tolerance not in TOLERANCE_PRESETS:
            raise ConfigError(f"EvalConfig.tolerance must be one of {tuple(TOLERANCE_PRESETS)}, got {self.tolerance!r}")
        if self.n_trials < 5:
            raise ConfigError(f"EvalConfig.n_trials must be at least 5 (fresh input sets per call), got {self.n_trials}")
        if not (isinstance(self.probe_stash_share, (int, float)) and 0.0 <= self.probe_stash_share <= 1.0):
            raise ConfigError(f"EvalConfig.probe_stash_share must be a share between 0 and 1, got "
                              f"{self.probe_stash_share!r}")
        for name in ("timeout_s", "timing_budget_s", "speed_threshold", "sol_tolerance", "warm_device_ms",
                     "judge_allowance_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)) or value < 0 or \
                    (name in ("timeout_s", "timing_budget_s") and value <= 0):
                raise ConfigError(f"EvalConfig.{name} must be a finite, positive number, got {value!r}")
        for name in ("timeout_s", "judge_allowance_s"):
            if getattr(self, name) > MAX_TIMEOUT_S:
                raise ConfigError(f"EvalConfig.{name} must be at most {MAX_TIMEOUT_S:g} s, got {getattr(self, name):g}")
        if self.warmup < 0 or self.reps < 1:
            raise ConfigError(f"EvalConfig warmup >= 0 and reps >= 1 required, got {self.warmup}, {self.reps}")
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"EvalConfig.{name} must be >= 0, got {value}")
        if not 0 <= self.baseline_drift_limit < 1:
            raise ConfigError(f"EvalConfig.baseline_drift_limit must be in [0, 1), got {self.baseline_drift_limit}")
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise ConfigError(f"EvalConfig.device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")

    @property
    def hard_limit_s(self) -> float:
        """The evaluation process's wall limit: the candidate's ``timeout_s`` and the judge's allowance for its own
        first measurements of the task."""
        return self.timeout_s + self.judge_allowance_s

    def tolerances(self, dtype_name: str) -> tuple[float, float]:
        """(atol, rtol) for an output dtype ('float32', ...); exact (0, 0) for integer and bool outputs."""
        preset = TOLERANCE_PRESETS[self.tolerance]
        if dtype_name not in preset:
            return (0.0, 0.0)
        atol, rtol = preset[dtype_name]
        return (self.atol if self.atol is not None else atol, self.rtol if self.rtol is not None else rtol)

    @classmethod
    def for_kind(cls, kind: str, base: "EvalConfig | None" = None, *, breakdown: bool = False) -> "EvalConfig":
        """The config for one command ``kind`` (see KINDS), starting from ``base`` (the defaults when None).

        ``verify`` turns timing off (and with it the per-kernel breakdown, which needs timing). ``profile`` and
        ``full`` turn timing on. The breakdown is on only when asked for: by ``breakdown`` (the agent's
        ``profile --breakdown``) or by ``base`` itself. It is never switched on by the kind alone, because it
        profiles the candidate's and torch.compile's kernels once more (GPU time every call) and because the same
        command must cost the same and show the same thing whether it runs here or on a pool.
        """
        if kind not in KINDS:
            raise ConfigError(f"evaluation kind must be one of {KINDS}, got {kind!r}")
        config = base if base is not None else cls()
        if kind == "verify":
            return replace(config, profile=False, kernel_breakdown=False)
        return replace(config, profile=True, kernel_breakdown=config.kernel_breakdown or breakdown)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown EvalConfig fields: {', '.join(sorted(unknown))}")
        return cls(**data)
