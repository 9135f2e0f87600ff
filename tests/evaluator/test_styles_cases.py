"""The parameter-style cases of degenerate tasks (tests/evaluator/cases/styles): each ModelNew, constructed the way the
candidate's process constructs it (same seed, the judge's perturbed pairs), matches the perturbed reference on a CPU
(small inputs) when honest and does not when it is a cheat; on a GPU (`-m gpu`) the evaluator accepts the honest
ones and rejects the cheats."""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest
import torch

from cuda_agent.evaluator import EvalConfig, evaluate
from cuda_agent.evaluator.judge import reference
from cuda_agent.evaluator.runner.perturb import perturbed_init

from corpus import CASES, Entry, all_entries

STYLES = [e for e in all_entries() if e.label.startswith("styles/")]
SMALL_INPUTS = {"L2/23_Conv3d_GroupNorm_Mean": lambda: [torch.rand(2, 3, 6, 10, 10)],
                "L3/20_MobileNetV2": lambda: [torch.rand(2, 3, 64, 64)]}


def _module(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_styles_cover_the_issue() -> None:
    styles = {s for e in STYLES for s in e.styles}
    assert {"nn_init", "direct_parameter", "buffer", "loaded_state", "parameter_folding"} <= styles, styles
    assert {e.task for e in STYLES} == set(SMALL_INPUTS) and any(not e.honest for e in STYLES)
    assert (CASES / "styles").is_dir()


@pytest.mark.parametrize("entry", STYLES, ids=[e.label for e in STYLES])
def test_style_matches_the_perturbed_reference_on_cpu(entry: Entry) -> None:
    task = entry.load_task()  # skips without the KernelBench data
    module = reference.load_task_module(task.code, entry.task)
    init = reference.init_values(module)
    keys: list[list[float]] = []
    ref = reference.build_model(module, 77, torch.device("cpu"), init, perturb=True, perturbed_keys=keys)
    solution = _module(entry.path / "solution.py", f"style_{entry.path.name}")
    torch.manual_seed(77)
    with perturbed_init(True, 77, keys):
        candidate = solution.ModelNew(*init).eval()
    inputs = SMALL_INPUTS[entry.task]()
    with torch.no_grad():
        expected, got = ref(*inputs), candidate(*inputs)
    assert expected.shape == got.shape
    assert float(expected.abs().max()) > 1e-2, "the perturbed reference carries a signal"
    close = torch.allclose(got, expected, atol=1e-4, rtol=1e-4)
    assert close == entry.honest, (entry.label, float((got - expected).abs().max()))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("entry", STYLES, ids=[e.label for e in STYLES])
def test_style_verdict_on_gpu(entry: Entry, warm_worker, tmp_path: Path) -> None:
    task = entry.load_task()
    result = evaluate(task, entry.materialise(tmp_path), EvalConfig(mode=entry.mode, reps=20, warmup=3,
                                                                    timeout_s=900), worker=warm_worker)
    detail = f"{entry.label}: {result.stage}: {result.reason}\n{result.notes}\n{result.log[-2000:]}"
    assert any("perturbed parameters" in note for note in result.notes), detail
    if entry.honest:
        assert result.correct and not result.rules_fired and result.reward >= 1, detail
    else:
        assert not result.correct and result.reward == -1, detail
