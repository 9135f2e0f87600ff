"""The evaluation contract (config, result, rules, timing stats, reward) imports without torch: every package reads
results, and a machine that only schedules or reports must not need PyTorch."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_the_contract_imports_with_torch_unimportable() -> None:
    script = textwrap.dedent("""
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is not importable here")
                return None

        sys.meta_path.insert(0, NoTorch())
        from cuda_agent.evaluator import EvalConfig, EvalResult, RULES, reward
        from cuda_agent.evaluator.stats import TimingStats
        stats = TimingStats.from_samples([1.0, 1.1, 0.9])
        result = EvalResult(task_id="t", stage="timed", correct=True, eager=stats, compile=stats, candidate=stats,
                            speedup_eager=1.2, speedup_compile=1.2)
        assert reward(result) == 3 and EvalResult.from_json(result.to_json()) == result
        assert EvalConfig(mode="relaxed").tolerances("float32") == (1e-2, 1e-2) and "input_mutation" in RULES
        assert "torch" not in sys.modules
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
