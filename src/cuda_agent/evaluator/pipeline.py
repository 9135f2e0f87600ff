"""One evaluation, inside the isolated worker process: reference, candidate, verification, audit, timing, reward.

The order matters. Trusted functions (comparison, timing) are bound when the worker imports this package, before
any candidate code exists in the process; the integrity snapshot is taken after the reference has run and before
the candidate loads; every candidate call is followed by the checks of `cuda_agent.evaluator.verify`.
"""
from __future__ import annotations

import logging
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from cuda_agent.errors import TaskError
from cuda_agent.evaluator import candidate as candidate_mod
from cuda_agent.evaluator import compare, reference
from cuda_agent.evaluator.checks.audit import audit
from cuda_agent.evaluator.checks.integrity import Snapshot
from cuda_agent.evaluator.checks.static import scan_source
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.report import python_thread_ids
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.evaluator.rules import RuleViolation
from cuda_agent.evaluator.verify import CandidateError, PhaseClock, Verifier
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)
_perf = time.perf_counter


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TaskError(f"device {name!r} requested but CUDA is not available on this machine")
    return device


def _evaluator_modules() -> list[str]:
    import sys

    return [name for name in sys.modules if name.startswith("cuda_agent.evaluator") or name == "cuda_agent.build.runtime"]


def run_job(job: dict[str, Any], threads_at_load: list[frozenset[int]] | None = None) -> dict[str, Any]:
    """Evaluate ``job`` (task, solution, config as plain dicts) and return the EvalResult as a dict. Never raises
    for anything the candidate does; evaluator bugs end in stage 'eval_error' with the traceback in the log.
    ``threads_at_load``, if given, receives the Python threads alive just before candidate code loaded (the report
    channel withholds the result if others are alive at the end)."""
    start = _perf()
    task = Task.from_dict(job["task"])
    config = EvalConfig.from_dict(job["config"])
    solution = Path(job["solution"]).resolve()
    audit().clear()
    try:
        result = _evaluate(task, solution, config, threads_at_load)
    except CandidateError as exc:
        if exc.violations:  # rules fired before the candidate went on to fail: the rules are the verdict
            result = failure(task.id, "rule_violation", "; ".join(str(v) for v in exc.violations[:3])
                             + f"; then {exc.stage}: {exc.reason}", log=exc.log, rules_fired=tuple(exc.violations))
        else:
            result = failure(task.id, exc.stage, exc.reason, log=exc.log)
    except candidate_mod.CandidateLoadError as exc:
        hits = tuple(RuleViolation(rule, detail) for rule, detail in audit().log.hits)
        if hits:  # the audit hook refused something the candidate asked for while loading
            result = failure(task.id, "rule_violation", "; ".join(str(v) for v in hits[:3])
                             + f"; then {exc.stage}: {exc.reason}", log=exc.log, rules_fired=hits,
                             build_seconds=exc.build_seconds)
        else:
            result = failure(task.id, exc.stage, exc.reason, log=exc.log, build_seconds=exc.build_seconds)
    except torch.OutOfMemoryError as exc:
        result = failure(task.id, "out_of_memory", f"out of memory: {exc}"[:500])
    except TaskError as exc:
        result = failure(task.id, "eval_error", f"the task itself failed: {exc}")
    except Exception as exc:  # noqa: BLE001 - the worker must always answer
        result = failure(task.id, "eval_error", f"evaluator error: {type(exc).__name__}: {exc}",
                         log=traceback.format_exc())
    result = replace(result, mode=config.mode, solution=str(solution), total_seconds=_perf() - start,
                     solution_kind=result.solution_kind or _kind_or_blank(solution))
    return result.trimmed(config.max_log_chars).to_dict()


def _kind_or_blank(solution: Path) -> str:
    try:
        return candidate_mod.solution_kind(solution)
    except Exception:  # noqa: BLE001
        return ""


def _fp32_task(inputs: list[Any], outputs: Any) -> bool:
    floats = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype.is_floating_point]
    floats += [v.dtype for _, v in compare.flatten(outputs) if isinstance(v, torch.Tensor) and v.dtype.is_floating_point]
    return bool(floats) and all(d in (torch.float32, torch.float64) for d in floats)


def _evaluate(task: Task, solution: Path, config: EvalConfig,
              threads_at_load: list[frozenset[int]] | None = None) -> EvalResult:
    device = resolve_device(config.device)
    kind = candidate_mod.solution_kind(solution)
    if kind == "workspace" and device.type != "cuda" and any((solution / "kernels").glob("*.cu")):
        # CUDA kernels cannot run here. Protection and the build are still checked (an agent on a CPU machine acts
        # on those), but running the reference on the CPU first would only burn minutes (KernelBench inputs reach
        # 6 GiB) before the first kernel call fails.
        candidate_mod.prepare_workspace(solution, task, arch=config.arch, cache_dir=config.build_cache_dir)
        raise candidate_mod.CandidateLoadError(
            "runtime_error", "built, but no CUDA GPU here (torch.cuda.is_available() is false) to run the kernels: "
                             "evaluate on a GPU host, or submit to a GPU pool (cuda-agent serve)")
    hook = audit()
    clock = PhaseClock()
    with clock("reference_setup"):
        module = reference.load_task_module(task.code, f"<task {task.id}>")
        seeds = reference.fresh_seeds(config.n_trials + 4, config.seed)
        model_seed = seeds[-1]
        ref_model = reference.build_model(module, model_seed, device)
        probe_inputs = reference.make_inputs(module, seeds[0], device)
        with torch.no_grad():
            probe_out = ref_model(*probe_inputs)
        fp32 = _fp32_task(probe_inputs, probe_out)
        ref_ops = _reference_ops(ref_model, probe_inputs)
        del probe_out, probe_inputs

    strict = config.mode == "strict"
    static_hits = scan_source(_source_of(kind, solution), strict=strict, fp32_task=fp32, single_file=kind == "single_file")
    if static_hits:
        violations = tuple(RuleViolation(h.rule, f"model source {h.detail}") for h in static_hits)
        return failure(task.id, "rule_violation", "the source breaks the rules (found before running it)",
                       rules_fired=violations, solution_kind=kind, device=str(device),
                       checks_run=("static",))

    baselines = None
    if config.profile:
        from cuda_agent.evaluator.profiling_step import measure_baselines_for

        with clock("baselines"):
            baselines, _hit = measure_baselines_for(task.code_hash, ref_model, module, config, device, seeds)
    with clock("snapshot"):
        _warm_runtime(device)
        snapshot = Snapshot.take(extra_modules=_evaluator_modules(),
                                 extra_classes=[module.Model], ops=compare.TRUSTED_OPS + tuple(ref_ops))
    roots = (str(solution if kind == "workspace" else solution.parent),)
    if threads_at_load is not None:
        threads_at_load.append(python_thread_ids())
    hook.arm(roots, (str(solution / "model.py"),) if kind == "workspace" else ())
    try:
        with clock("candidate_load"):
            cand = candidate_mod.load(kind, solution, task, arch=config.arch, cache_dir=config.build_cache_dir)
        verifier = Verifier(task=task, config=config, device=device, module=module, ref_model=ref_model,
                            cand=cand, snapshot=snapshot, seeds=seeds, fp32_task=fp32, model_seed=model_seed,
                            baselines=baselines, clock=clock)
        return verifier.run()
    finally:
        hook.disarm()


def _warm_runtime(device: torch.device) -> None:
    """Start the thread pools and handles PyTorch creates lazily (intra-op threads, cuBLAS, events), so that the
    thread baseline taken next holds them and only the candidate's own threads count as new."""
    with torch.no_grad():
        x = torch.ones(1 << 18, device=device)
        (x * 2).sum().item()
        if device.type == "cuda":
            a = torch.ones(64, 64, device=device)
            (a @ a).sum().item()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            end.record()
            torch.cuda.synchronize(device)


def _source_of(kind: str, solution: Path) -> str:
    path = solution / "model_new.py" if kind == "workspace" else solution
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _reference_ops(model: torch.nn.Module, inputs: list[Any]) -> list[str]:
    """The dispatcher ops the reference runs (so that a kernel registered over one of them is noticed)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: dict[str, None] = {}

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            seen.setdefault(func.name(), None)
            return func(*args, **(kwargs or {}))

    try:
        with torch.no_grad(), _Record():
            model(*inputs)
    except Exception:  # noqa: BLE001 - recording is best effort (some ops refuse Python modes)
        pass
    return list(seen)
