"""Load the candidate: a workspace (build its kernels, then import model_new.py) or a KernelBench single-file
solution (a .py whose import compiles inline CUDA with torch.utils.cpp_extension.load_inline)."""
from __future__ import annotations

import importlib.util
import re
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.errors import ProtectedFileError, WorkspaceError
from cuda_agent.tasks.task import Task

_GLOBAL_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?\w[\w:<>,\s\*]*?\s+(\w+)\s*\(")


class CandidateLoadError(Exception):
    """The candidate could not be loaded; ``stage`` is the EvalResult stage it ends in."""

    def __init__(self, stage: str, reason: str, log: str = "", build_seconds: float | None = None) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.log = log
        self.build_seconds = build_seconds


@dataclass
class Candidate:
    """A loaded candidate module and what the checks need to know about it."""

    kind: str
    root: Path
    module: types.ModuleType
    source: str
    reference_files: tuple[str, ...]
    kernel_names: tuple[str, ...] = ()
    build_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def model_class(self) -> type:
        cls = getattr(self.module, "ModelNew", None)
        if not isinstance(cls, type):
            raise CandidateLoadError("runtime_error", "the solution defines no class ModelNew(nn.Module)")
        return cls


def solution_kind(solution: Path) -> str:
    """'workspace' for a folder, 'single_file' for a .py; raise WorkspaceError otherwise."""
    if solution.is_dir():
        return "workspace"
    if solution.is_file() and solution.suffix == ".py":
        return "single_file"
    raise WorkspaceError(f"{solution}: not a workspace folder or a .py single-file solution")


def kernel_names_in(text: str) -> tuple[str, ...]:
    """Names of the ``__global__`` functions defined in CUDA source text."""
    return tuple(dict.fromkeys(_GLOBAL_KERNEL.findall(text)))


def prepare_workspace(solution: Path, task: Task, *, arch: str | None, cache_dir: str | None) -> tuple[Path | None, float, tuple[str, ...]]:
    """Check protected files and build the kernels; return (library or None when kernels/ has no sources,
    build seconds, kernel names). Raises CandidateLoadError(protected_changed | build_failed)."""
    from cuda_agent.workspace import Workspace

    try:
        ws = Workspace.open(solution)
    except WorkspaceError as exc:
        raise CandidateLoadError("eval_error", str(exc)) from exc
    if ws.task.code != task.code:
        raise CandidateLoadError("protected_changed", "the workspace's task (its manifest and model.py) is not the "
                                                      "task being evaluated; protected files must not be edited")
    try:
        ws.verify_protected()
    except ProtectedFileError as exc:
        raise CandidateLoadError("protected_changed", str(exc)) from exc
    sources = [p for p in sorted(ws.kernels_dir.rglob("*")) if p.suffix in (".cu", ".cpp", ".cc")]
    names: list[str] = []
    for path in sources:
        names.extend(kernel_names_in(path.read_text(errors="replace")))
    if not sources:
        return None, 0.0, ()
    from cuda_agent.build import build_workspace

    start = time.perf_counter()
    try:
        result = build_workspace(ws.root, arch=arch, cache_dir=cache_dir)
    except Exception as exc:  # noqa: BLE001 - any build failure is the candidate's build failure
        raise CandidateLoadError("build_failed", f"build error: {type(exc).__name__}: {exc}",
                                 build_seconds=time.perf_counter() - start) from exc
    if not result.ok or result.library is None:
        raise CandidateLoadError("build_failed", result.diagnostics or "the build failed", log=result.log,
                                 build_seconds=result.seconds)
    return Path(result.library), result.seconds, tuple(dict.fromkeys(names))


def import_candidate(kind: str, solution: Path, library: Path | None) -> types.ModuleType:
    """Execute the candidate's module (model_new.py, or the single file). Raise CandidateLoadError:
    build_failed when an inline extension fails to compile, runtime_error for anything else it raises."""
    if kind == "workspace":
        from cuda_agent.build import runtime

        runtime.set_active_library(library)
        # Rationale: binding.py is protected and was verified; the evaluator provides its equivalent itself, so that
        # `from binding import ops` neither compiles code under the audit nor runs a file the candidate could touch.
        binding = types.ModuleType("binding")
        binding.ops = runtime.load_library(library) if library is not None else None
        sys.modules["binding"] = binding
        path = solution / "model_new.py"
        name = "model_new"
        if not path.is_file():
            raise CandidateLoadError("runtime_error", "the workspace has no model_new.py")
        folder = str(solution)
    else:
        path = solution
        name = "cuda_agent_solution"
        folder = str(solution.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - the candidate may raise anything, SystemExit included
        text = "".join(traceback.format_exception(exc))
        if "cpp_extension" in text and ("Error building extension" in text or "CalledProcessError" in text
                                        or "ninja" in text.lower()):
            raise CandidateLoadError("build_failed", f"the inline extension did not compile: {exc}", log=text) from exc
        stage = "build_failed" if type(exc).__name__ == "BuildError" else "runtime_error"
        raise CandidateLoadError(stage, f"importing {path.name} raised {type(exc).__name__}: {exc}",
                                 log=text) from exc
    return module


def load(kind: str, solution: Path, task: Task, *, arch: str | None, cache_dir: str | None) -> Candidate:
    """Build (workspace) and import the candidate. The caller arms the audit before calling this."""
    if kind == "workspace":
        library, seconds, names = prepare_workspace(solution, task, arch=arch, cache_dir=cache_dir)
        source = (solution / "model_new.py").read_text(errors="replace") if (solution / "model_new.py").is_file() else ""
        module = import_candidate(kind, solution, library)
        return Candidate(kind, solution, module, source, (str(solution / "model.py"),), names, seconds)
    source = solution.read_text(errors="replace")
    start = time.perf_counter()
    module = import_candidate(kind, solution, None)
    return Candidate(kind, solution.parent, module, source, (), kernel_names_in(source), time.perf_counter() - start)
