"""The trusted side of an evaluation: what the caller does before and after the judge, which runs task code.

Task code (the reference model, ``get_inputs``, ``get_init_inputs``, the module's top level) is model-written code
too, so the judge that runs it lives in a sandbox of its own (`cuda_agent.sandbox.task_code`) and the caller never
imports it. Everything that writes host state happens here instead, in the caller:

- `stage`: the solution is checked (protected files) and built here, with the compiler's trusted cache (nvcc itself
  runs sandboxed), into a staging folder the judge reads; the judge copies it into the candidate's scratch folder.
- `read_reply`: the judge's answer is read with content checks (a regular file or message of bounded size, JSON, an
  `EvalResult` of this task) before anyone believes it.
- `store_baselines`: baseline records the judge measured are written into the baseline cache here, after checking
  that each is keyed by this evaluation's own task (the key is recomputed from its parts), and that every time is
  a finite, positive number; the judge itself sees the cache read-only.
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuda_agent.errors import SandboxError
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.evaluator.result import EvalResult, failure
from cuda_agent.sandbox.process import gpu_device_nodes, require_sandbox
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 64 << 20
MAX_BASELINE_RECORDS = 6  # host-launched, graph at K0 and at the graph clock's K, and a refresh of each
STAGE = "stage"


def wants_gpu(config: EvalConfig) -> bool:
    """Whether the judge's sandbox gets the GPU's device nodes (without importing torch here)."""
    return config.device != "cpu" and bool(gpu_device_nodes())


def stage(job: dict[str, Any], config: EvalConfig, folder: Path) -> dict[str, Any] | EvalResult:
    """Check and build the job's solution into ``folder``/stage; return the job with its ``prepared`` fields, or a
    finished result when the solution cannot run (a build failure, edited protected files, no sandbox)."""
    from cuda_agent.evaluator.judge.prepare import PrepareError, prepare, staged_fields

    task = Task.from_dict(job["task"])
    solution = Path(job["solution"])
    started = time.perf_counter()
    out = folder / STAGE
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o755)
    try:
        sandboxed = require_sandbox(config.unsandboxed_trusted_code)
        prepared = prepare(solution, task, config, out, sandboxed=sandboxed, gpu=wants_gpu(config))
    except PrepareError as exc:
        result = failure(task.id, exc.stage, exc.reason, log=exc.log, build_seconds=exc.build_seconds)
        return _finished(result, config, solution, time.perf_counter() - started)
    except SandboxError as exc:
        return _finished(failure(task.id, "eval_error", f"no sandbox for the candidate: {exc}"), config, solution,
                         time.perf_counter() - started)
    fields = staged_fields(prepared)
    return {**job, "prepared": {"stage": str(out), "fields": fields, "files": staged_hashes(out),
                                "caller_seconds": time.perf_counter() - started}}


def staged_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every regular file under ``folder`` by relative path: the judge copies only these, unchanged.
    Rationale: the staging folder lies where the warm worker's judges (which run task code) can write."""
    import hashlib

    hashes: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            hashes[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def _finished(result: EvalResult, config: EvalConfig, solution: Path, seconds: float) -> EvalResult:
    from cuda_agent.evaluator.judge.prepare import solution_kind

    try:
        kind = result.solution_kind or solution_kind(solution)
    except Exception:  # noqa: BLE001 - the kind is informational
        kind = ""
    return replace(result, mode=config.mode, solution=str(solution), total_seconds=seconds,
                   solution_kind=kind).trimmed(config.max_log_chars)


def read_reply_file(path: str | Path) -> dict[str, Any] | None:
    """The judge's reply file: a regular file (no link, no FIFO) of bounded size holding a JSON object, else None."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPLY_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else None


def accept(reply: dict[str, Any], job: dict[str, Any]) -> EvalResult:
    """The result in the judge's ``reply`` (``{"result": ..., "baselines": [...]}``), checked: an `EvalResult` of
    this job's task. Baseline records are stored (`store_baselines`). Raises ValueError when it is not one."""
    data = reply.get("result")
    if not isinstance(data, dict):
        raise ValueError("the judge's reply holds no result")
    try:
        result = EvalResult.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"the judge's result is malformed: {exc}") from exc
    if result.task_id != job["task"]["id"]:
        raise ValueError(f"the judge answered for task {result.task_id!r}, not {job['task']['id']!r}")
    _check_result(result)
    records = reply.get("baselines") or []
    if isinstance(records, list) and records:
        store_baselines(records[:MAX_BASELINE_RECORDS], job)
    prepared = job.get("prepared")
    if prepared:
        extra = dict(result.extra or {})
        extra["caller_seconds"] = {"stage": float(prepared.get("caller_seconds", 0.0))}
        result = replace(result, extra=extra)
    return result


_SPEED_FIELDS = ("baseline_drift", "speedup_eager", "speedup_eager_low", "speedup_eager_high", "speedup_compile",
                 "speedup_compile_low", "speedup_compile_high", "sol_floor_ms", "sol_fraction", "build_seconds",
                 "verify_seconds", "profile_seconds", "total_seconds")


def _check_result(result: EvalResult) -> None:
    """Types and ranges of what the reward and the metrics read. Raises ValueError."""
    if not isinstance(result.correct, bool) or not isinstance(result.reward, int) or isinstance(result.reward, bool) \
            or result.reward not in (-1, 0, 1, 2, 3):
        raise ValueError("correct or reward is malformed")
    if not (isinstance(result.continuous_reward, (int, float)) and math.isfinite(result.continuous_reward)):
        raise ValueError("continuous_reward is not a finite number")
    for name in _SPEED_FIELDS:
        value = getattr(result, name)
        if value is not None and not _finite_positive(value):
            raise ValueError(f"{name}={value!r} is not a finite, non-negative number")
    texts = (result.reason, result.log, result.device, result.mode, *result.notes, *result.checks_run)
    if not all(isinstance(t, str) for t in texts) or not isinstance(result.extra, dict):
        raise ValueError("a text field is not text")


def _finite_positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _check_stats(data: Any) -> None:
    from cuda_agent.evaluator.stats import TimingStats

    if not isinstance(data, dict):
        raise ValueError("timing statistics are not an object")
    stats = TimingStats.from_dict(dict(data))
    for name in ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "ci_low_ms", "ci_high_ms"):
        value = getattr(stats, name)
        if not _finite_positive(value):
            raise ValueError(f"timing statistic {name}={value!r} is not a finite, non-negative number")
    if not stats.median_ms > 0:
        raise ValueError("a median time is not positive")


def store_baselines(records: list[Any], job: dict[str, Any]) -> int:
    """Write the judge's baseline records into the cache, each only if its key is this job's task's own (recomputed
    from the parts it carries) and its times are finite and positive; return how many were written. A record that
    fails a check is logged and dropped (the next evaluation measures again)."""
    from cuda_agent.evaluator.baselines import BaselineCache, baseline_key, times_from_dict

    config = EvalConfig.from_dict(job["config"])
    task_hash = Task.from_dict(job["task"]).code_hash
    cache = BaselineCache(config.baseline_cache_dir)
    written = 0
    for record in records:
        try:
            if not isinstance(record, dict):
                raise ValueError("not an object")
            meta = record.get("meta")
            if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict):
                raise ValueError("no key parts")
            parts = {k: meta.get(k) for k in ("gpu_name", "torch_version", "cuda_version")}
            if not all(isinstance(v, str) or v is None for v in parts.values()):
                raise ValueError("key parts are not strings")
            key = baseline_key(task_hash, settings=meta["settings"], **parts)  # type: ignore[arg-type]
            if record.get("key") != key:
                raise ValueError("its key is not this task's")
            times = record.get("times")
            if not isinstance(times, dict):
                raise ValueError("no times")
            _check_stats(times.get("eager"))
            _check_stats(times.get("compile"))
            if len(json.dumps(times)) > 1 << 20:
                raise ValueError("too large")
            cache.put(key, times_from_dict(times, key), {**parts, "settings": meta["settings"],
                                                         "task": task_hash})
            written += 1
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("dropped a baseline record the judge handed back: %s", exc)
    return written
