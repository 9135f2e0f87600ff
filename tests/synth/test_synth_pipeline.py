"""Synthesis runs: parquet output that the task loader reads, rejection counts, resuming after a kill, the LLM
composer through a scripted endpoint, the worker pool's time cap, and the CLI."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.synth import (
    Composed, FilterConfig, LLMComposer, RuleComposer, ScriptedChatClient, SynthConfig, SynthRun,
)
from cuda_agent.synth.llm import build_prompt, extract_code
from cuda_agent.synth.pipeline import state_path
from cuda_agent.tasks import load_parquet
from cuda_agent.locations import kernelbench_root

CPU = FilterConfig(min_ms=0.0, max_ms=5_000.0, check_compile=False)


class ListComposer:
    """Replays fixed candidate code (a stand-in composer for pipeline tests)."""

    name = "list"

    def __init__(self, codes: list[str]) -> None:
        self.codes = codes

    def compose(self, index: int) -> Composed | None:
        if index >= len(self.codes):
            return None
        return Composed(index=index, code=self.codes[index], ops=("torch.tanh",), composer=self.name)


def test_run_writes_parquet_the_task_loader_reads(small_catalog, tmp_path: Path) -> None:
    out = tmp_path / "tasks.parquet"
    summary = SynthRun(RuleComposer(small_catalog, seed=5), SynthConfig(n=3, seed=5, filters=CPU), out).run()
    assert summary.accepted == 3
    assert summary.generated == summary.accepted + sum(summary.rejected.values())
    metrics = summary.metrics()
    assert metrics["generated"] == summary.generated and "rejected_too_fast" in metrics
    tasks = load_parquet(out)
    assert len(tasks) == 3 and not tasks.failures
    import pyarrow.parquet as pq

    table = pq.read_table(out)
    assert {"ops", "data_source", "code", "runtime_ms", "kb_nearest"} <= set(table.column_names)
    assert all(t.ops and t.metadata["data_source"].startswith("cuda-agent-synth") for t in tasks)


def test_contaminated_duplicate_and_degenerate_candidates_are_counted(tmp_path: Path, make_task) -> None:
    root = kernelbench_root()
    if root is None:
        pytest.skip("KernelBench tasks not found")
    copy = (root / "level1" / "22_Tanh.py").read_text().replace("batch_size = 4096", "batch_size = 2") \
        .replace("dim = 393216", "dim = 64")
    good = make_task("        return torch.tanh(x) * torch.sigmoid(x) + 1.0")
    codes = [copy, good, good.replace("dim = 64", "dim = 32"), make_task("        return x * 0.0")]
    summary = SynthRun(ListComposer(codes), SynthConfig(n=10, max_candidates=4, filters=CPU, kernelbench=str(root)),
                       tmp_path / "t.parquet").run()
    assert summary.accepted == 1
    assert summary.rejected == {"contaminated": 1, "near_duplicate": 1, "degenerate_zero": 1}


_KILLABLE = """
import sys, time
from cuda_agent.synth import Catalog, FilterConfig, RuleComposer, SynthConfig, SynthRun
catalog = Catalog.load(sys.argv[1])
def slow(progress):
    time.sleep(0.3)
SynthRun(RuleComposer(catalog, seed=9), SynthConfig(n=6, seed=9, filters=FilterConfig(min_ms=0.0, max_ms=5000.0,
         check_compile=False)), sys.argv[2], progress=slow).run()
"""


@pytest.mark.slow
def test_a_killed_run_resumes_without_redoing_decided_candidates(small_catalog_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "tasks.parquet"
    state = state_path(out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, str(small_catalog_file), str(out)], env=env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if state.exists() and state.read_text().count('"kind": "candidate"') >= 2:
            break
        if proc.poll() is not None:
            pytest.fail("the run ended before it could be killed")
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = [json.loads(line) for line in state.read_text().splitlines() if line.strip().endswith("}")]
    decided = [r["index"] for r in before if r.get("kind") == "candidate"]
    assert len(decided) >= 2
    with open(state, "a") as fh:
        fh.write('{"kind": "candidate", "index": 99')  # a torn line, as a kill mid-write leaves
    from cuda_agent.synth import Catalog

    catalog = Catalog.load(small_catalog_file)
    config = SynthConfig(n=6, seed=9, filters=FilterConfig(min_ms=0.0, max_ms=5000.0, check_compile=False))
    summary = SynthRun(RuleComposer(catalog, seed=9), config, out).run()
    assert summary.resumed == len(decided)
    assert summary.accepted == 6
    indices = [json.loads(l)["index"] for l in state.read_text().splitlines() if '"candidate"' in l]
    assert len(indices) == len(set(indices)) and set(decided) <= set(indices)
    assert len(load_parquet(out)) == 6
    other = SynthConfig(n=6, seed=10, filters=config.filters)
    with pytest.raises(ConfigError, match="other settings"):
        SynthRun(RuleComposer(catalog, seed=10), other, out).run()


def test_llm_composer_prompts_with_the_chosen_operators(small_catalog, tmp_path: Path, make_task) -> None:
    reply = "Here it is:\n```python\n" + make_task("        return torch.sigmoid(torch.tanh(x)) * 3.0") + "```\n"
    client = ScriptedChatClient([reply, "sorry, I cannot"])
    composer = LLMComposer(small_catalog, client, seed=1, standalone_probability=0.0)
    picked = composer.pick(0)
    assert 2 <= len(picked) <= 5 and all(s.composable for s in picked)
    summary = SynthRun(composer, SynthConfig(n=5, max_candidates=2, filters=CPU), tmp_path / "llm.parquet").run()
    assert summary.accepted == 1 and summary.rejected == {"compose_failed": 1}
    prompt = client.calls[0][-1]["content"]
    assert all(spec.name in prompt for spec in picked)
    assert "get_init_inputs" in client.calls[0][0]["content"]
    assert extract_code("no code here") is None
    assert build_prompt(picked)[0]["role"] == "system"


@pytest.mark.slow
def test_worker_pool_caps_a_hanging_candidate_and_goes_on(make_task) -> None:
    from cuda_agent.synth.filter_workers import WorkerPool

    hang = make_task("        time.sleep(600)\n        return x", extra="import time")
    good = make_task("        return torch.tanh(x) + 1.0")
    with WorkerPool(1, CPU, timeout_s=5.0) as pool:
        pool.submit(0, hang)
        results = []
        deadline = time.monotonic() + 240
        while not results and time.monotonic() < deadline:
            results = pool.poll(0.5)
        assert results and results[0][0] == 0 and results[0][1].reason == "timeout"
        assert "phase eager" in results[0][1].detail
        pool.submit(1, good)
        results = []
        while not results and time.monotonic() < deadline:
            results = pool.poll(0.5)
        assert results[0][0] == 1 and results[0][1].ok


def test_cli_synth_writes_a_loadable_task_set(small_catalog_file: Path, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from cuda_agent.cli.synth import register

    app = typer.Typer()
    register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps typer from collapsing the app into one command
        pass

    out = tmp_path / "cli.parquet"
    result = CliRunner().invoke(app, ["synth", "--n", "2", "--out", str(out), "--no-compile", "--catalog",
                                      str(small_catalog_file), "--min-ms", "0", "--max-ms", "5000"])
    assert result.exit_code == 0, result.output
    assert "accepted" in result.output
    assert len(load_parquet(out)) == 2
    bad = CliRunner().invoke(app, ["synth", "--composer", "gpt", "--out", str(out)])
    assert bad.exit_code == 2 and "rule or llm" in bad.output
