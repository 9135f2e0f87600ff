"""The workspace path on a CPU: protected files, a real nvcc build failure, relaxed PyTorch model_new.py accepted,
and a model_new.py that reads the reference from the workspace finds nothing there (its process sees its own files
only)."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from cuda_agent.evaluator import EvalConfig, evaluate
from cuda_agent.workspace import create_workspace

from evalcases import CASES, resolve_task

HONEST = (CASES / "cpu" / "honest_linear_relu.py").read_text()
CFG = EvalConfig(mode="relaxed", profile=False, timeout_s=180)


@pytest.fixture()
def task():
    return resolve_task("small_linear_relu")


@pytest.mark.slow
def test_workspace_with_pytorch_model_new_is_accepted(task, tmp_path: Path, warm_worker) -> None:
    ws = create_workspace(task, tmp_path / "ws", solution={"model_new.py": HONEST})
    result = evaluate(task, ws.root, CFG, worker=warm_worker)
    assert result.stage == "correct", (result.reason, result.rule_names, result.log[-1500:])
    assert result.solution_kind == "workspace"


@pytest.mark.slow
def test_edited_reference_is_protected_changed(task, tmp_path: Path, warm_worker) -> None:
    ws = create_workspace(task, tmp_path / "ws", solution={"model_new.py": HONEST})
    os.chmod(ws.model_path, stat.S_IWUSR | stat.S_IRUSR)
    ws.model_path.write_text(task.code.replace("torch.relu", "torch.abs"))
    result = evaluate(task, ws.root, CFG, worker=warm_worker)
    assert result.stage == "protected_changed" and "model.py" in result.reason
    assert result.reward == -1


@pytest.mark.slow
def test_workspace_for_another_task_is_refused(task, tmp_path: Path, warm_worker) -> None:
    other = resolve_task("tiny_mean")
    ws = create_workspace(other, tmp_path / "ws", solution={"model_new.py": HONEST})
    result = evaluate(task, ws.root, CFG, worker=warm_worker)
    assert result.stage == "protected_changed"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_compile_error_is_build_failed(task, tmp_path: Path, warm_worker) -> None:
    broken = '#include "cuda_agent.h"\nvoid f(ca::Tensor x) { this is not C++ }\nCA_EXPORT(f);\n'
    ws = create_workspace(task, tmp_path / "ws", solution={"model_new.py": HONEST, "kernels/bad.cu": broken})
    result = evaluate(task, ws.root, EvalConfig(mode="relaxed", profile=False, timeout_s=180, arch="90"),
                      worker=warm_worker)
    assert result.stage == "build_failed", (result.stage, result.reason)
    assert "bad.cu" in result.reason and result.reward == -1


@pytest.mark.slow
def test_the_reference_is_not_in_the_candidates_view(task, tmp_path: Path, warm_worker) -> None:
    source = HONEST.replace("import torch\n", "import os\nimport torch\n", 1) + (
        "\n_REFERENCE = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'model.py')).read()\n")
    ws = create_workspace(task, tmp_path / "ws", solution={"model_new.py": source})
    result = evaluate(task, ws.root, CFG, worker=warm_worker)
    assert result.stage == "runtime_error" and "model.py" in result.reason, (result.stage, result.reason)
    assert "No such file" in result.reason


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_cuda_kernels_without_a_gpu_are_built_then_refused_clearly(task, tmp_path: Path, warm_worker) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    kernel = ('#include "cuda_agent.h"\n__global__ void k(float* y) { y[0] = 1.f; }\n'
              "void f(ca::Tensor x) { k<<<1, 1, 0, ca::stream()>>>(x.data_ptr<float>()); }\nCA_EXPORT(f);\n")
    ws = create_workspace(task, tmp_path / "ws", solution={"model_new.py": HONEST, "kernels/k.cu": kernel})
    result = evaluate(task, ws.root, EvalConfig(mode="relaxed", profile=False, timeout_s=180, arch="90"),
                      worker=warm_worker)
    assert result.stage == "runtime_error" and "no CUDA GPU" in result.reason, (result.stage, result.reason)
    assert result.input_sets_checked == 0
