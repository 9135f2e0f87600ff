"""Materialise and check the agent's workspace.

Layout (see docs/architecture.md): model.py (the reference), model_new.py and kernels/ (the agent's), binding.py
and include/cuda_agent.h (the fixed binding infrastructure), SKILL.md, and .cuda_agent/manifest.json. Protected
files are checksummed at creation; `Workspace.verify_protected` compares them with what they must be: the task's
own code and this package's own infrastructure files, not merely the manifest (which lives in the workspace and so
could be rewritten along with the file it describes).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

from cuda_agent.errors import ProtectedFileError, WorkspaceError
from cuda_agent.tasks.task import Task

MANIFEST = ".cuda_agent/manifest.json"
MODEL = "model.py"
MODEL_NEW = "model_new.py"
KERNELS = "kernels"
BINDING = "binding.py"
HEADER = "include/cuda_agent.h"
SKILL = "SKILL.md"
PROTECTED_PATHS: tuple[str, ...] = (MODEL, BINDING, HEADER, SKILL, MANIFEST)
# What the agent may not change, as every guard checks it (the sandbox's read-only binds, the file tools, writing a
# solution): each protected file, and the top-level folder of a protected file inside one (``include/``,
# ``.cuda_agent/``) whole, since the agent has nothing to write there. A folder ends in ``/``.
PROTECTED_ROOTS: tuple[str, ...] = tuple(dict.fromkeys(
    rel.split("/", 1)[0] + "/" if "/" in rel else rel for rel in PROTECTED_PATHS))
AGENT_PATHS: tuple[str, ...] = (MODEL_NEW, KERNELS)


def is_protected(rel: str, roots: Iterable[str] = PROTECTED_ROOTS) -> bool:
    """Whether the workspace-relative POSIX path ``rel`` is, or lies inside, one of ``roots`` (PROTECTED_ROOTS
    unless a caller protects others)."""
    rel = rel.strip("/")
    return any(rel == root.strip("/") or rel.startswith(root.strip("/") + "/") for root in roots)


def _infra(name: str) -> bytes:
    return resources.files("cuda_agent.workspace").joinpath("infra", name).read_bytes()


def skill_text() -> str:
    """SKILL.md: the workflow, rules, commands and optimisation guide the agent works by."""
    return resources.files("cuda_agent.workspace").joinpath("SKILL.md").read_text()


def model_new_template() -> str:
    return _infra("model_new_template.py.txt").decode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_bytes(task: Task) -> bytes:
    checksums = {rel: _sha256(content) for rel, content in _expected_protected(task).items()}
    manifest = {"version": 1, "task": task.to_dict(), "checksums": checksums}
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def _expected_protected(task: Task) -> dict[str, bytes]:
    return {
        MODEL: task.code.encode(),
        BINDING: _infra("binding.py"),
        HEADER: _infra("include/cuda_agent.h"),
        SKILL: skill_text().encode(),
    }


@dataclass(frozen=True)
class Workspace:
    """A workspace folder on disk and the task it was made for."""

    root: Path
    task: Task

    @property
    def model_path(self) -> Path:
        return self.root / MODEL

    @property
    def model_new_path(self) -> Path:
        return self.root / MODEL_NEW

    @property
    def kernels_dir(self) -> Path:
        return self.root / KERNELS

    @classmethod
    def open(cls, root: str | Path, task: Task | None = None) -> "Workspace":
        """Open an existing workspace; raise `WorkspaceError` if ``root`` is not one.

        Pass the ``task`` when you hold it (the evaluator and the agent env do): protection is then checked against
        it. Without it the task is read from the workspace's manifest, which the workspace's user could rewrite.
        """
        root = Path(root).resolve()
        manifest = root / MANIFEST
        if not manifest.is_file():
            raise WorkspaceError(
                f"{root} is not a cuda-agent workspace (no {MANIFEST}); create one with `cuda-agent workspace new`"
            )
        if task is not None:
            return cls(root, task)
        try:
            data = json.loads(manifest.read_text())
            task = Task.from_dict(data["task"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtectedFileError(f"protected file {MANIFEST} was modified or is unreadable ({exc})") from exc
        return cls(root, task)

    def verify_protected(self) -> None:
        """Raise `ProtectedFileError` naming the first protected file that differs from what it must be."""
        for rel, expected in _expected_protected(self.task).items():
            path = self.root / rel
            if path.is_symlink() or not path.is_file():
                raise ProtectedFileError(f"protected file {rel} was removed or replaced; restore it (do not edit it)")
            if _sha256(path.read_bytes()) != _sha256(expected):
                raise ProtectedFileError(f"protected file {rel} was modified; protected files must not be edited")
        manifest = self.root / MANIFEST
        if manifest.is_symlink() or not manifest.is_file() or manifest.read_bytes() != _manifest_bytes(self.task):
            raise ProtectedFileError(f"protected file {MANIFEST} was modified; protected files must not be edited")

    def solution_files(self) -> dict[str, bytes]:
        """The agent's files: model_new.py and everything under kernels/ (relative path -> content)."""
        files: dict[str, bytes] = {}
        if self.model_new_path.is_file():
            files[MODEL_NEW] = self.model_new_path.read_bytes()
        if self.kernels_dir.is_dir():
            for path in sorted(self.kernels_dir.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    files[path.relative_to(self.root).as_posix()] = path.read_bytes()
        return files

    def solution_hash(self) -> str:
        digest = hashlib.sha256()
        for rel, content in sorted(self.solution_files().items()):
            digest.update(rel.encode() + b"\0" + content + b"\0")
        return digest.hexdigest()

    def write_solution(self, files: dict[str, bytes | str]) -> None:
        """Write agent files (model_new.py, kernels/...); refuse protected paths and paths outside the workspace."""
        for rel, content in files.items():
            target = (self.root / rel).resolve()
            if self.root not in target.parents:
                raise WorkspaceError(f"{rel}: outside the workspace")
            rel_posix = target.relative_to(self.root).as_posix()
            if is_protected(rel_posix):
                raise ProtectedFileError(f"{rel_posix} is protected; write model_new.py or files under kernels/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)


def create_workspace(task: Task, root: str | Path, *, overwrite: bool = False,
                     solution: dict[str, bytes | str] | None = None) -> Workspace:
    """Create a workspace for ``task`` at ``root``, which must not exist or be empty; with ``overwrite`` it may also
    hold a workspace (with its manifest), which is replaced. Any other folder is refused with `WorkspaceError`:
    replacing it would delete files that are not ours."""
    root = Path(root).resolve()
    if root.exists() and not root.is_dir():
        raise WorkspaceError(f"{root} is a file, not a folder; pick another path")
    if root.exists() and any(root.iterdir()):
        if not (root / MANIFEST).is_file():
            raise WorkspaceError(f"{root} exists, is not empty and is not a workspace (no {MANIFEST}); pick another "
                                 "folder, or empty it yourself")
        if not overwrite:
            raise WorkspaceError(f"{root} already holds a workspace; pick another folder, or pass --force to "
                                 "replace it")
        shutil.rmtree(root)
    (root / KERNELS).mkdir(parents=True, exist_ok=True)
    (root / ".cuda_agent").mkdir(exist_ok=True)
    (root / "include").mkdir(exist_ok=True)
    for rel, content in _expected_protected(task).items():
        path = root / rel
        path.write_bytes(content)
        os.chmod(path, 0o444)
    (root / MODEL_NEW).write_text(model_new_template())
    (root / MANIFEST).write_bytes(_manifest_bytes(task))
    os.chmod(root / MANIFEST, 0o444)
    workspace = Workspace(root, task)
    if solution:
        workspace.write_solution(solution)
    return workspace
