"""Write benchmark results in the one schema the repo uses: benchmarks/results/<name>.json with
``name``, ``machine`` (GPU and CPU model), ``date``, ``command`` and ``metrics`` (a flat object of numbers)."""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_model() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
        if names:
            return f"{len(names)}x {names[0]}"
    except (OSError, subprocess.SubprocessError):
        pass
    return "no GPU"


def machine_description() -> str:
    return f"GPU: {gpu_model()}; CPU: {cpu_model()} ({os.cpu_count()} cores)"


def results_dir() -> Path:
    """``benchmarks/results`` of the checkout (override with ``$CUDA_AGENT_RESULTS_DIR``)."""
    env = os.environ.get("CUDA_AGENT_RESULTS_DIR")
    if env:
        return Path(env)
    return Path.cwd() / "benchmarks" / "results"


def write_result(
    name: str, metrics: Mapping[str, float | int | bool], command: str | None = None, extra: Mapping[str, Any] | None = None
) -> Path:
    """Write one result file and return its path; metrics must be a flat mapping of finite numbers."""
    flat: dict[str, float | int] = {}
    for key, value in metrics.items():
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
            raise ValueError(f"metric {key!r} must be a finite number, got {value!r}")
        flat[key] = value
    record: dict[str, Any] = {
        "name": name,
        "machine": machine_description(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command or " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv]),
        "metrics": flat,
    }
    if extra:
        record["details"] = dict(extra)
    out_dir = results_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    return path
