"""Before the candidate runs: check the workspace, build its kernels in the sandbox, and lay out what the candidate
process may see (its scratch folder: the solution's Python file, its built library, its prebuilt extensions).

The list of the candidate's own kernels comes from the compiler (ptxas names every entry function it compiles), not
from reading the source: templates, ``extern "C"``, macros, ``__launch_bounds__`` in either position and multi-line
declarations are all what they compile to.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any

from cuda_agent.errors import ProtectedFileError, SandboxError, WorkspaceError
from cuda_agent.evaluator.config import EvalConfig
from cuda_agent.sandbox.process import ConfinedSpec, run_confined
from cuda_agent.tasks.task import Task

INLINE_DIR = "inline"
_FUNCTION = re.compile(r"^\s*Function ([^\s:]+)\s*:", re.MULTILINE)


class PrepareError(Exception):
    """The candidate cannot run: ``stage`` is the result stage (build_failed, protected_changed, ...)."""

    def __init__(self, stage: str, reason: str, log: str = "", build_seconds: float | None = None) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.log = log
        self.build_seconds = build_seconds


@dataclass
class Prepared:
    """What the candidate process is given. Paths under ``scratch`` are seen inside as /scratch/...; ``module`` and
    ``library`` are those inside paths."""

    kind: str
    scratch: Path
    module: str
    library: str | None = None
    inline_dir: str | None = None
    source: str = ""
    own_kernels: tuple[str, ...] = ()
    jit_kernels: tuple[str, ...] = ()
    build_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def solution_kind(solution: Path) -> str:
    """'workspace' for a folder, 'single_file' for a .py; raise WorkspaceError otherwise."""
    if solution.is_dir():
        return "workspace"
    if solution.is_file() and solution.suffix == ".py":
        return "single_file"
    raise WorkspaceError(f"{solution}: not a workspace folder or a .py single-file solution")


def demangle(names: tuple[str, ...]) -> tuple[str, ...]:
    """C++ names as the profiler prints them (c++filt); the names unchanged where c++filt is missing."""
    if not names:
        return names
    try:
        done = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, timeout=30)
        lines = done.stdout.splitlines()
        if done.returncode == 0 and len(lines) == len(names):
            return tuple(lines)
    except (OSError, subprocess.SubprocessError):
        pass
    return names


def prepare(solution: Path, task: Task, config: EvalConfig, scratch: Path, *, sandboxed: bool,
            gpu: bool) -> Prepared:
    """Check and build ``solution`` and copy what the candidate needs into ``scratch``. Raises PrepareError."""
    kind = solution_kind(solution)
    if kind == "workspace":
        prepared = _prepare_workspace(solution, task, config, scratch, sandboxed=sandboxed)
    else:
        prepared = _prepare_single_file(solution, config, scratch, sandboxed=sandboxed, gpu=gpu)
    _prepare_jit(prepared, config, scratch, sandboxed=sandboxed, gpu=gpu)
    return prepared


def _prepare_jit(prepared: Prepared, config: EvalConfig, scratch: Path, *, sandboxed: bool, gpu: bool) -> None:
    """Triton kernels (compiled at their first launch): their names count as the solution's own (read from the
    source, not from the candidate's process), and on a GPU host Triton's runtime helper is staged for them."""
    from cuda_agent.evaluator.judge import jit

    names = jit.triton_kernel_names(prepared.source)
    if not names:
        return
    prepared.jit_kernels = names
    prepared.own_kernels = tuple(dict.fromkeys((*prepared.own_kernels, *names)))
    if gpu:
        from cuda_agent.compiler.builder import default_cache_dir

        cache = Path(config.build_cache_dir) if config.build_cache_dir else default_cache_dir()
        prepared.notes.append(jit.stage_helper(scratch, cache, sandboxed=sandboxed, gpu=gpu))


def restore(staged: dict, scratch: Path) -> Prepared:
    """The solution the trusted caller checked and built (`cuda_agent.evaluator.trusted.stage`), copied from its
    staging folder into the candidate's ``scratch``: exactly the files the caller listed, each with the SHA-256 it
    recorded (a file changed since, a link or a missing file is refused: PrepareError)."""
    import hashlib

    stage = Path(staged["stage"])
    for rel, digest in dict(staged.get("files", {})).items():
        source, target = stage / rel, scratch / rel
        if ".." in Path(rel).parts or source.is_symlink() or not source.is_file():
            raise PrepareError("eval_error", f"the staged solution's {rel} is missing or not a regular file")
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise PrepareError("eval_error", f"the staged solution's {rel} changed after it was built")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    fields = dict(staged["fields"])
    for name in ("own_kernels", "jit_kernels"):
        fields[name] = tuple(fields.get(name, ()))
    fields["notes"] = list(fields.get("notes", ()))
    return Prepared(scratch=scratch, **fields)


def staged_fields(prepared: Prepared) -> dict[str, Any]:
    """Every field of ``prepared`` but its scratch folder, as JSON values: what `restore` rebuilds it from.
    Rationale: a field left out here is silently reset in the judge (the Triton kernels' names were: every strict
    Triton solution was refused as PyTorch-only on the GPU, 2026-12-03)."""
    out: dict[str, Any] = {}
    for f in dataclass_fields(Prepared):
        if f.name == "scratch":
            continue
        value = getattr(prepared, f.name)
        out[f.name] = list(value) if isinstance(value, (tuple, list)) else value
    return out


def _prepare_workspace(solution: Path, task: Task, config: EvalConfig, scratch: Path, *,
                       sandboxed: bool) -> Prepared:
    from cuda_agent.workspace import Workspace

    try:
        ws = Workspace.open(solution)
    except WorkspaceError as exc:
        raise PrepareError("eval_error", str(exc)) from exc
    if ws.task.code != task.code:
        raise PrepareError("protected_changed", "the workspace's task (its manifest and model.py) is not the task "
                                                "being evaluated; protected files must not be edited")
    try:
        ws.verify_protected()
    except ProtectedFileError as exc:
        raise PrepareError("protected_changed", str(exc)) from exc
    model_new = solution / "model_new.py"
    if model_new.is_symlink() or not model_new.is_file():
        # Rationale: this process copies the file into the sandbox; following a link it would hand the candidate a
        # host file (or another workspace's solution) the sandbox exists to hide.
        raise PrepareError("runtime_error", "the workspace's model_new.py is missing or not a regular file (a symlink "
                                            "is refused): write the solution into model_new.py itself")
    shutil.copy2(model_new, scratch / "model_new.py")
    prepared = Prepared("workspace", scratch, "/scratch/model_new.py",
                        source=model_new.read_text(errors="replace"))
    sources = [p for p in sorted(ws.kernels_dir.rglob("*")) if p.suffix in (".cu", ".cpp", ".cc")]
    if not sources:
        return prepared
    result = _build(ws.root, config, sandboxed)
    if not result.ok or result.library is None:
        raise PrepareError("build_failed", result.diagnostics or "the build failed", log=result.log,
                           build_seconds=result.seconds)
    shutil.copy2(result.library, scratch / "libkernels.so")
    prepared.library = "/scratch/libkernels.so"
    prepared.own_kernels = demangle(compiled_kernels([Path(result.library)]) or result.kernels)
    prepared.build_seconds = result.seconds
    return prepared


def _build(root: Path, config: EvalConfig, sandboxed: bool):  # noqa: ANN202 - BuildResult, imported lazily
    from cuda_agent.compiler.builder import default_cache_dir
    from cuda_agent.compiler.confined import build_confined

    cache = Path(config.build_cache_dir) if config.build_cache_dir else default_cache_dir()
    started = time.perf_counter()
    try:
        return build_confined(root, arch=config.arch, cache_dir=cache, allow_unsandboxed=not sandboxed)
    except SandboxError as exc:
        raise PrepareError("eval_error", str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - any build failure is the candidate's build failure
        raise PrepareError("build_failed", f"build error: {type(exc).__name__}: {exc}",
                           build_seconds=time.perf_counter() - started) from exc


def _prepare_single_file(solution: Path, config: EvalConfig, scratch: Path, *, sandboxed: bool,
                         gpu: bool) -> Prepared:
    source = solution.read_text(errors="replace")
    shutil.copy2(solution, scratch / "solution.py")
    prepared = Prepared("single_file", scratch, "/scratch/solution.py", source=source)
    if "load_inline" not in source and "cpp_extension" not in source:
        return prepared
    out = scratch / INLINE_DIR
    out.mkdir()
    started = time.perf_counter()
    how = "from its source"
    if _build_inline_static(source, out, config, sandboxed=sandboxed) is None:
        how = "by importing it"
        log = _build_inline(scratch, config, sandboxed=sandboxed, gpu=gpu)
        if not (out / "index.json").is_file():
            prepared.build_seconds = time.perf_counter() - started
            if "load_inline" in log or "Error building extension" in log or "error" in log.lower():
                raise PrepareError("build_failed", _build_failure_text(log), log=log[-20000:],
                                   build_seconds=prepared.build_seconds)
            return prepared  # the solution imports cpp_extension but builds nothing at import
    prepared.build_seconds = time.perf_counter() - started
    prepared.inline_dir = f"/scratch/{INLINE_DIR}"
    index = _read_index(out / "index.json")
    # Rationale: the build's output is the candidate's to print (its module's top level ran there), so which
    # kernels it compiled is read from the built objects themselves.
    prepared.own_kernels = demangle(compiled_kernels([out / entry["file"] for entry in index.values()
                                                      if isinstance(entry, dict) and "file" in entry]))
    prepared.notes.append(f"built {len(index)} inline extension(s) {how} in {prepared.build_seconds:.1f} s")
    return prepared


def inline_call_key(spec) -> str:  # noqa: ANN001 - an InlineSpec, imported lazily
    """The key under which the candidate process looks up the extension for ``spec``: the runner's own key of the
    same call (`ca_runner.inline.spec_key`), so the call the solution makes at import finds what was built."""
    from cuda_agent.evaluator.runner.inline import spec_key

    # functions as the call would pass them (name -> docstring); every other field is already in the call's terms
    return spec_key({**spec.to_dict(), "functions": None if spec.functions is None else dict(spec.functions)})


def _build_inline_static(source: str, out: Path, config: EvalConfig, *, sandboxed: bool) -> dict | None:
    """Build the solution's ``load_inline`` extensions from its source text, without running it: the calls read
    statically (`extract_inline_specs`), each built by the fast inline builder (compilers sandboxed, results in a
    content-addressed cache shared by every evaluation) and written into ``out`` with the index the candidate
    process reads. None when the calls are not static or a flag is outside the fast builder's allow-list: the
    caller then imports the solution in a sandboxed build process instead (slower, same result)."""
    from cuda_agent.compiler.builder import default_cache_dir
    from cuda_agent.compiler.inline import InlineExtractionError, InlineSpecError, build_inline, extract_inline_specs
    from cuda_agent.errors import BuildError

    try:
        specs = extract_inline_specs(source)
    except (InlineExtractionError, InlineSpecError):
        return None
    if not specs:
        return None
    cache = (Path(config.build_cache_dir) if config.build_cache_dir else default_cache_dir()) / "inline"
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cak-inline-"))
    try:
        if sandboxed:
            from cuda_agent.sandbox import sandboxed_runner

            runner = sandboxed_runner(work, extra_ro=[cache], readonly_workspace=False)
        else:
            runner = None
        index: dict[str, dict] = {}
        for spec in specs:
            try:
                result = build_inline(spec, cache_dir=cache, arch=config.arch, runner=runner, work_dir=work,
                                      jobs=max(1, os.cpu_count() or 1), timeout_s=max(60.0, config.timeout_s))
            except SandboxError as exc:
                raise PrepareError("eval_error", str(exc)) from exc
            except BuildError:
                return None  # torch or the toolkit not found by the fast builder: torch's own build may still work
            if not result.ok:
                if not result.steps:
                    return None  # refused before compiling (a flag outside the allow-list)
                raise PrepareError("build_failed", f"the inline extension {spec.name!r} did not compile:\n"
                                   f"{result.diagnostics}", log=result.log[-20000:], build_seconds=result.seconds)
            assert result.module_path is not None
            key = inline_call_key(spec)
            shutil.copyfile(result.module_path, out / f"{key}.so")
            index[key] = {"module": spec.name, "file": f"{key}.so", "python_module": spec.is_python_module}
        (out / "index.json").write_text(json.dumps(index))
        return index
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _build_inline(scratch: Path, config: EvalConfig, *, sandboxed: bool, gpu: bool) -> str:
    """Import the solution in a confined build process whose ``load_inline`` builds into scratch/inline; return
    its output (the compiler's messages). The candidate's code runs there (its module's top level), so nothing it
    builds is cached for anyone else."""
    import sys

    from cuda_agent.evaluator.judge.candidate import RUNNER_MOUNT, runner_copy

    command = [sys.executable, "-m", "ca_runner.inline", "/scratch/solution.py", f"/scratch/{INLINE_DIR}"]
    timeout = max(30.0, config.timeout_s)
    env = {"PYTHONPATH": RUNNER_MOUNT, "TORCH_EXTENSIONS_DIR": "/tmp/torch_extensions",
           "MAX_JOBS": str(max(1, os.cpu_count() or 2))}
    if config.arch:
        env["TORCH_CUDA_ARCH_LIST"] = _torch_arch(config.arch)
    try:
        if sandboxed:
            spec = ConfinedSpec(scratch=scratch, ro_dirs={RUNNER_MOUNT: runner_copy()}, gpu=gpu, env=env)
            done = run_confined(spec, command, timeout)
        else:
            done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, **env, "PYTHONPATH": runner_copy()})
            done = subprocess.CompletedProcess(command, done.returncode, done.stdout + done.stderr, "")
    except subprocess.TimeoutExpired as exc:
        raise PrepareError("build_failed", f"building the inline extension ran past {timeout:.0f} s") from exc
    except SandboxError as exc:
        raise PrepareError("eval_error", str(exc)) from exc
    return done.stdout or ""


def _read_index(path: Path) -> dict:
    """The inline build's index, a file the candidate's build process wrote: only a regular file, no link, no FIFO
    (which would hang the judge), bounded in size."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise PrepareError("build_failed", f"the inline build's index is not readable: {exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
            raise PrepareError("build_failed", "the inline build's index is not a regular file of sensible size")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = json.loads(fh.read())
    except ValueError as exc:
        raise PrepareError("build_failed", f"the inline build's index is not JSON: {exc}") from exc
    finally:
        os.close(fd)
    if not isinstance(data, dict):
        raise PrepareError("build_failed", "the inline build's index is not a JSON object")
    return data


def compiled_kernels(objects: list[Path]) -> tuple[str, ...]:
    """The kernels compiled into built objects, as cuobjdump lists them (empty where cuobjdump is missing: then
    nothing counts as the solution's own by name)."""
    import shutil

    tool = shutil.which("cuobjdump") or ("/usr/local/cuda/bin/cuobjdump"
                                          if Path("/usr/local/cuda/bin/cuobjdump").exists() else None)
    names: list[str] = []
    for obj in objects:
        if tool is None or not obj.is_file() or obj.is_symlink():
            continue
        try:
            done = subprocess.run([tool, "-res-usage", str(obj)], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            continue
        names.extend(_FUNCTION.findall(done.stdout))
    return tuple(dict.fromkeys(names))


def _torch_arch(arch: str) -> str:
    text = arch.strip().lower().removeprefix("sm_")
    digits = text.rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}{'a' if text.endswith('a') else ''}" if digits.isdigit() else arch


def _build_failure_text(log: str) -> str:
    lines = [line for line in log.splitlines() if "error" in line.lower()]
    head = "\n".join(lines[:20]) if lines else log[-3000:]
    return f"the inline extension did not compile:\n{head}"
