"""The real-kernel cases in tests/evaluator/cases/gpu: honest kernels of five kinds accepted (and timed), each
GPU cheat rejected by its rule, device failures (illegal address, hang) turned into results. Needs a CUDA GPU
(the lead runs these on the H200); `test_gpu_case_kernels_compile` checks every case builds with real nvcc on any
machine."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.evaluator import EvalConfig, evaluate
from cuda_agent.workspace import create_workspace

from evalcases import FAILURE_STAGES, Case, gpu_cases

CASES = gpu_cases()


def materialise(case: Case, root: Path) -> Path:
    """A real workspace for the case's task, with the case's model_new.py and kernels/."""
    task = case.load_task()
    files: dict[str, bytes | str] = {"model_new.py": (case.solution / "model_new.py").read_text()}
    for path in sorted((case.solution / "kernels").rglob("*")):
        if path.is_file():
            files[path.relative_to(case.solution).as_posix()] = path.read_bytes()
    ws = create_workspace(task, root / case.name, solution=files)
    return ws.root


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gpu_case(case: Case, warm_worker, tmp_path: Path) -> None:
    root = materialise(case, tmp_path)
    honest = case.expect == "correct"
    config = EvalConfig(mode=case.mode, profile=case.profiled, reps=20, warmup=3,
                        timeout_s=25 if case.expect == "timeout" else 600)
    result = evaluate(case.load_task(), root, config, worker=warm_worker)
    if honest:
        assert result.stage == "timed" and result.correct, (result.stage, result.reason, result.rule_names,
                                                             result.notes, result.log[-2000:])
        assert result.candidate is not None and result.candidate.median_ms > 0
        assert result.speedup_eager is not None and result.reward in (1, 2, 3)
        assert "kernel_tap" in result.checks_run
        # the baselines on the judge's clock: the reference timed as a candidate, within the plausible ratio
        clock = result.extra["judge_clock"]
        assert "reference_judge_ms" in clock and 0.67 <= clock["clock_factor"] <= 1.5, (clock, result.notes)
        # the reported baselines are the ones the speedup used (scaled to the judge's clock, and by the drift)
        assert result.speedup_eager == pytest.approx(result.baseline_ms("eager") / result.candidate.median_ms)
    elif case.expect in FAILURE_STAGES:
        assert result.stage in (case.expect, "crashed"), (result.stage, result.reason, result.log[-2000:])
        if case.name == "illegal_address":
            assert "illegal" in (result.reason + result.log).lower()
    else:
        assert case.expect in result.rule_names, (result.stage, result.reason, result.rule_names, result.notes,
                                                  result.log[-2000:])
        assert result.reward == -1


@pytest.mark.gpu
def test_profile_breakdown_shows_the_candidate_and_the_compiled_kernels(warm_worker, tmp_path: Path) -> None:
    """`kernel_breakdown` lists the candidate's own kernels and torch.compile's (recorded with the baselines, before
    the candidate loaded); eager PyTorch is timed again and the drift applied stays within its cap."""
    from cuda_agent.evaluator.profile import classify_kernel

    case = {c.name: c for c in CASES}["honest_fused_elementwise"]
    config = EvalConfig(mode=case.mode, kernel_breakdown=True, reps=20, warmup=3,
                        baseline_cache_dir=str(tmp_path / "baselines"))
    result = evaluate(case.load_task(), materialise(case, tmp_path), config, worker=warm_worker)
    assert result.stage == "timed", (result.stage, result.reason, result.notes)
    ours = [r["name"] for r in result.kernel_breakdown]
    theirs = [r["name"] for r in result.compile_kernel_breakdown]
    assert ours and all(classify_kernel(name) == "other" for name in ours), ours
    assert any(name.startswith("triton_") for name in theirs), theirs
    assert all(r["total_us"] > 0 and r["calls"] >= 1 for r in result.compile_kernel_breakdown)
    assert result.eager_paired is not None and 1 / 1.05 <= result.baseline_drift <= 1.05


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_gpu_case_kernels_compile(tmp_path: Path) -> None:
    """Every GPU case builds with the real toolchain (sm_90), so the GPU run fails only on behaviour."""
    from cuda_agent.compiler import build_workspace

    failures = []
    for case in CASES:
        if case.task.startswith("L") and "/" in case.task:
            try:
                case.load_task()
            except BaseException:  # noqa: BLE001 - KernelBench absent: skip that case here
                continue
        root = materialise(case, tmp_path)
        result = build_workspace(root, arch="90")
        if not result.ok:
            failures.append(f"{case.name}: {result.diagnostics[:800]}")
    assert not failures, "\n".join(failures)


def test_gpu_catalogue() -> None:
    kinds = {c.name for c in CASES if c.expect == "correct"}
    assert len(kinds) >= 5
    assert {"runtime_error", "timeout"} <= {c.expect for c in CASES}  # the cheats: tests/evaluator/test_adversarial_gpu.py
