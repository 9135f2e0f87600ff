"""How much a sandbox adds to each command: the median wall time of ``true`` run in it."""
from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from cuda_agent.sandbox._limits import SandboxLimits


def measure_overhead_ms(n: int = 50, *, identity: str = "auto",
                        progress: Callable[[int, int], None] | None = None) -> float:
    """Median milliseconds of ``Sandbox.exec("true")`` over ``n`` runs (after one warm-up), in a scratch
    workspace. Includes everything an agent command pays: bubblewrap setup, the limits, the effect checks.

    Raises `SandboxError` when the sandbox cannot run here."""
    from cuda_agent.sandbox.sandbox import Sandbox

    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-overhead-"))
    try:
        ws = root / "ws"
        ws.mkdir()
        (ws / "model.py").write_text("# reference\n")
        (ws / "kernels").mkdir()
        with Sandbox(ws, protected=("model.py",), limits=SandboxLimits(timeout_s=30), identity=identity) as sandbox:
            sandbox.exec("true")
            times: list[float] = []
            for i in range(n):
                started = time.perf_counter()
                result = sandbox.exec("true")
                times.append((time.perf_counter() - started) * 1000.0)
                if result.returncode != 0:
                    raise RuntimeError(f"`true` failed in the sandbox: {result.stderr.strip()}")
                if progress is not None:
                    progress(i + 1, n)
        return statistics.median(times)
    finally:
        shutil.rmtree(root, ignore_errors=True)
