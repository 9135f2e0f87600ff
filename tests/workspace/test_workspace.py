"""Workspaces: layout, protected files and their checks."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.errors import ProtectedFileError, WorkspaceError
from cuda_agent.tasks import Task
from cuda_agent.workspace import PROTECTED_PATHS, Workspace, create_workspace, skill_text

CODE = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(16, 16)]
def get_init_inputs():
    return []
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return create_workspace(Task(id="user/relu", code=CODE), tmp_path / "ws")


def test_layout(workspace: Workspace):
    root = workspace.root
    assert (root / "model.py").read_text() == CODE
    assert "class ModelNew" in (root / "model_new.py").read_text()
    assert (root / "kernels").is_dir()
    assert "from cuda_agent.compiler.runtime import load_ops" in (root / "binding.py").read_text()
    assert "CA_EXPORT" in (root / "include" / "cuda_agent.h").read_text()
    assert (root / "SKILL.md").read_text() == skill_text()
    reopened = Workspace.open(root)
    assert reopened.task.code == CODE
    workspace.verify_protected()


def test_skill_guide_covers_what_the_issue_asks():
    text = skill_text()
    for needle in ("cuda-agent build", "cuda-agent verify", "cuda-agent profile", "5% faster than `torch.compile`",
                   "cuBLAS", "cuDNN", "atol = rtol = 1e-2", "Coalesce", "Vectorise", "shared memory", "__shfl",
                   "Tensor cores", "Fuse", "protected"):
        assert needle in text, needle


@pytest.mark.parametrize("rel", [p for p in PROTECTED_PATHS])
def test_changing_any_protected_file_is_caught_by_name(workspace: Workspace, rel: str):
    path = workspace.root / rel
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes() + b"\n# tampered\n")
    with pytest.raises(ProtectedFileError, match=rel.split("/")[-1].replace(".", r"\.")):
        workspace.verify_protected()
    with pytest.raises(ProtectedFileError, match=rel.split("/")[-1].replace(".", r"\.")):
        Workspace.open(workspace.root).verify_protected()


def test_rewriting_file_and_manifest_together_is_still_caught(workspace: Workspace):
    import hashlib
    import json

    model = workspace.root / "model.py"
    os.chmod(model, 0o644)
    model.write_text(CODE.replace("torch.relu(x)", "x"))
    manifest_path = workspace.root / ".cuda_agent/manifest.json"
    os.chmod(manifest_path, 0o644)
    manifest = json.loads(manifest_path.read_text())
    manifest["checksums"]["model.py"] = hashlib.sha256(model.read_bytes()).hexdigest()
    manifest["task"]["code"] = model.read_text()
    manifest_path.write_text(json.dumps(manifest))
    # whoever holds the task (evaluator, agent env) is not fooled by a consistent rewrite of file and manifest
    trusted = Workspace.open(workspace.root, task=workspace.task)
    with pytest.raises(ProtectedFileError, match="model.py"):
        trusted.verify_protected()


def test_deleted_or_symlinked_protected_file(workspace: Workspace, tmp_path: Path):
    (workspace.root / "binding.py").unlink()
    with pytest.raises(ProtectedFileError, match="binding.py was removed"):
        workspace.verify_protected()
    other = tmp_path / "elsewhere.py"
    other.write_text(CODE)
    (workspace.root / "model.py").unlink()
    (workspace.root / "model.py").symlink_to(other)
    with pytest.raises(ProtectedFileError):
        workspace.verify_protected()


def test_agent_files_and_refusals(workspace: Workspace):
    workspace.write_solution({"kernels/a.cu": "// a", "model_new.py": "x = 1"})
    assert set(workspace.solution_files()) == {"kernels/a.cu", "model_new.py"}
    before = workspace.solution_hash()
    workspace.write_solution({"kernels/a.cu": "// b"})
    assert workspace.solution_hash() != before
    with pytest.raises(ProtectedFileError):
        workspace.write_solution({"model.py": "evil"})
    with pytest.raises(WorkspaceError):
        workspace.write_solution({"../escape.py": "evil"})


def test_existing_folder_is_not_clobbered(tmp_path: Path):
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(WorkspaceError, match="not empty and is not a workspace"):
            create_workspace(Task(id="t", code=CODE), folder, overwrite=overwrite)
    assert (folder / "keep.txt").read_text() == "mine"


def test_overwrite_replaces_only_a_workspace(tmp_path: Path):
    old = create_workspace(Task(id="t", code=CODE), tmp_path / "ws")
    old.write_solution({"kernels/old.cu": "// old"})
    with pytest.raises(WorkspaceError, match="already holds a workspace"):
        create_workspace(Task(id="t2", code=CODE), old.root)
    new = create_workspace(Task(id="t2", code=CODE), old.root, overwrite=True)
    assert new.task.id == "t2" and not (new.root / "kernels" / "old.cu").exists()


def test_protected_paths_are_one_list_every_guard_reads(workspace: Workspace):
    """The workspace's protected files, their top folders whole, handed as they are to the agent's shell (the
    sandbox's read-only binds, the shells' file verbs) and used by the agent's file tools."""
    from cuda_agent.agent.files import WorkspaceFiles
    from cuda_agent.agent.runner import make_shell
    from cuda_agent.workspace import PROTECTED_ROOTS, is_protected

    assert PROTECTED_ROOTS == ("model.py", "binding.py", "include/", "SKILL.md", ".cuda_agent/")
    assert all(is_protected(rel) for rel in PROTECTED_PATHS)
    assert is_protected("include/new.h") and is_protected(".cuda_agent") and is_protected("model.py/x")
    assert not any(is_protected(rel) for rel in ("model_new.py", "kernels/model.py", "include.cu", "SKILL.md.bak"))
    with make_shell("local", workspace.root, lambda command, args: ("", 0)) as shell:
        assert shell.protected == WorkspaceFiles(shell).protected == PROTECTED_ROOTS
    with pytest.raises(ProtectedFileError):
        workspace.write_solution({"include/extra.h": "// not the agent's"})
