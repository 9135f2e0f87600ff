"""The relaxed-mode parity benchmark's own parts, on the CPU: which cases it judges, how it loads KernelBench's
evaluator without that package's __init__, and how it counts verdict pairs. The verdicts themselves need a GPU
(benchmarks/relaxed_parity.py on the H200)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cuda_agent.locations import kernelbench_root

from benchmark_scripts import loaded_script
from corpus import honest_entries


@pytest.fixture(scope="module")
def parity():
    with loaded_script("relaxed_parity") as module:
        yield module


def test_cases_are_the_honest_single_files_of_kernelbench_tasks(parity) -> None:
    root = kernelbench_root()
    if root is None:
        pytest.skip("needs the KernelBench data")
    entries = honest_entries()
    cases = parity.parity_cases(entries)
    expected = {e.label for e in entries if e.single_file and e.task.startswith("L")}
    assert {c.label for c in cases} == expected and cases
    for case in cases:
        assert case.solution.is_file() and case.solution.suffix == ".py"
        assert case.task_file.is_file() and case.task_file.parent.parent == root


def test_kernelbench_is_loaded_without_its_package_init(parity, tmp_path: Path) -> None:
    """KernelBench's __init__ imports LLM clients the evaluator does not need; the driver must not run it."""
    package = tmp_path / "kernelbench"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('litellm is not installed')\n")
    (package / "eval.py").write_text("from . import timing\n\ndef eval_kernel_against_ref(*a, **k):\n    pass\n")
    (package / "timing.py").write_text("")
    parity.check_import(package, None)
    (package / "eval.py").write_text("import no_such_module_anywhere\n")
    with pytest.raises(SystemExit, match="no_such_module_anywhere"):
        parity.check_import(package, None)


def test_summary_counts_each_pair_and_leaves_out_missing_verdicts(parity) -> None:
    rows = [{"ours": True, "kernelbench": True}, {"ours": True, "kernelbench": False},
            {"ours": False, "kernelbench": True}, {"ours": False, "kernelbench": False},
            {"ours": True, "kernelbench": True}, {"ours": True, "kernelbench": None},
            {"ours": None, "kernelbench": False}]
    summary = parity.summarise(rows)
    assert summary["cases"] == 5 and summary["equal"] == 3 and summary["parity"] == pytest.approx(0.6)
    assert (summary["both_correct"], summary["ours_only"], summary["kernelbench_only"], summary["both_refused"]) \
        == (2, 1, 1, 1)
    assert summary["kernelbench_no_verdict"] == 1 and summary["ours_no_verdict"] == 1
    assert parity.summarise([])["parity"] == 0.0
    assert sys.modules.get("kernelbench") is None  # the driver's namespace package lives in its own process only
