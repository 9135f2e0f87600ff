"""Helpers for pool tests: stand-in jobs and readers for the stand-in's run log (imported by the test modules)."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from cuda_agent.pool import EvalJob
from cuda_agent.tasks import Task


# A solution the stand-in scores 2 ("timed", correct): ModelNew and a __global__ kernel registered with CA_EXPORT.
STANDIN_MODEL_NEW = "class ModelNew:\n    pass\n"
STANDIN_KERNEL = "__global__ void k(float* y) { y[0] = 0.0f; }\nCA_EXPORT(k);\n"


def standin_job(task: Task, *, seconds: float | None = None, fault: str | None = None, tag: str = "",
                **kwargs: Any) -> EvalJob:
    """A job for a stand-in pool: a timed, correct solution (unique per ``tag``) unless ``fault`` says otherwise."""
    spec: dict[str, Any] = {}
    if seconds is not None:
        spec["seconds"] = seconds
    if fault is not None:
        spec["fault"] = fault
    files = {"model_new.py": f"# {tag}\n{STANDIN_MODEL_NEW}", "kernels/k.cu": STANDIN_KERNEL,
             "standin.json": json.dumps(spec)}
    return EvalJob.create(task, files, **kwargs)


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def overlapping_pairs(entries: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(gpu, job a, job b) for every two finished jobs whose [start, end] overlap on one GPU."""
    by_gpu: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry.get("end") is not None:
            by_gpu[entry["gpu"]].append(entry)
    clashes = []
    for gpu, runs in by_gpu.items():
        runs.sort(key=lambda e: e["start"])
        for a, b in zip(runs, runs[1:]):
            if b["start"] < a["end"]:
                clashes.append((gpu, a["job_id"], b["job_id"]))
    return clashes


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
