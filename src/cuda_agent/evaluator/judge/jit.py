"""The judge's side of kernels compiled at their first launch (Triton): the compile broker, Triton's prebuilt runtime
helper, and which kernels are the solution's own.

The candidate's process cannot start ptxas or a C compiler (`runner.confine`), so the judge gives it
* a compile broker (`runner.broker`): a process in a sandbox of its own beside the candidate's, serving Triton's
  bundled ptxas (found from the installed package, never from anything the candidate names);
* Triton's runtime helper (``cuda_utils``, compiled by Triton from its own driver.c) built here once per host by
  Triton itself in a confined process, cached with its SHA-256, and copied into the candidate's scratch folder
  (`stage_helper`), where the candidate's ``jit`` hook answers Triton's compiler call with it.
Which kernels are the solution's own: the functions its source decorates with ``triton.jit`` (their names are the
names Triton gives the kernels), read statically, never from the candidate's process.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from functools import lru_cache
from pathlib import Path

from cuda_agent.errors import SandboxError
from cuda_agent.evaluator.runner.broker import C_TOOL
from cuda_agent.sandbox.process import ConfinedSpec, run_confined, spawn_confined

log = logging.getLogger(__name__)

HELPER_DIR = ".jit"           # in the scratch folder, where the candidate starts (`runner.jit.PREBUILT_DIR`)
_TRITON_IMPORT = re.compile(r"^\s*(import triton\b|from triton\b)", re.MULTILINE)
_JIT_DECORATORS = ("jit", "autotune", "heuristics")
# The names torch.compile (inductor) gives its Triton kernels: a solution's own kernel named so would make PyTorch's
# generated kernels count as the solution's in strict mode, so such a name is never the solution's own.
_INDUCTOR_NAME = re.compile(r"^triton_(poi|red|per|tem|for|spl|mix|unk)_")
_HELPER_TIMEOUT_S = 300.0


@lru_cache(maxsize=1)
def triton_dir() -> Path | None:
    """The installed triton package's folder (found without importing it), or None."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=1)
def triton_tools() -> dict[str, str]:
    """The programs the broker serves: Triton's bundled ptxas (and ptxas-blackwell), by name. Empty without Triton."""
    root = triton_dir()
    if root is None:
        return {}
    out = {}
    for name in ("ptxas", "ptxas-blackwell"):
        path = root / "backends" / "nvidia" / "bin" / name
        if path.is_file() and os.access(path, os.X_OK):
            out[name] = str(path.resolve())
    compiler = c_compiler()
    if out and compiler is not None:
        out[C_TOOL] = compiler  # Triton's per-signature launchers (before Triton 3.7), built by the broker
    return out


def c_compiler() -> str | None:
    """The C compiler Triton would use here (``CC``, else gcc, else clang, else cc), resolved; None without one."""
    named = os.environ.get("CC")
    for candidate in ([named] if named else []) + ["gcc", "clang", "cc"]:
        found = shutil.which(candidate)
        if found:
            return os.path.realpath(found)
    return None


def broker_command(fd: int, tools: dict[str, str]) -> list[str]:
    return [sys.executable, "-m", "ca_runner.broker", "--fd", str(fd),
            *[f"--tool={name}={path}" for name, path in sorted(tools.items())]]


@lru_cache(maxsize=1)
def _empty_dir() -> str:
    path = tempfile.mkdtemp(prefix="cuda-agent-broker-")
    os.chmod(path, 0o555)
    return path


def start_broker(fd: int, tools: dict[str, str], *, sandboxed: bool, runner_root: str,
                 runner_mount: str) -> "subprocess.Popen[bytes]":
    """Start the compile broker on its end ``fd`` of the socket pair (inherited; the caller closes its copy). In a
    sandbox of its own (no GPU, its folder read-only and empty, its own /tmp) unless ``sandboxed`` is False (the
    trusted-code opt-out). Raises SandboxError or OSError."""
    command = broker_command(fd, tools)
    if sandboxed:
        spec = ConfinedSpec(scratch=Path(_empty_dir()), ro_dirs={runner_mount: runner_root}, gpu=False,
                            env={"PYTHONPATH": runner_mount}, tmp_bytes=1 << 30, scratch_readonly=True)
        return spawn_confined(spec, command, pass_fds=(fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return subprocess.Popen(command, pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, cwd=_empty_dir(),
                            env={**os.environ, "PYTHONPATH": runner_root})


# -- the solution's own kernels ----------------------------------------------------------------------------------
def uses_triton(source: str) -> bool:
    return bool(_TRITON_IMPORT.search(source))


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def triton_kernel_names(source: str) -> tuple[str, ...]:
    """The functions ``source`` decorates with ``triton.jit`` (alone or under autotune/heuristics): the names its
    Triton kernels run under, less any named like torch.compile's kernels. Empty when the source does not import
    triton or does not parse."""
    if not uses_triton(source):
        return ()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    names = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
             and any(_decorator_name(d) == "jit" for d in node.decorator_list)
             and all(_decorator_name(d) in _JIT_DECORATORS for d in node.decorator_list)
             and not _INDUCTOR_NAME.match(node.name)]
    return tuple(dict.fromkeys(names))


# -- Triton's runtime helper -------------------------------------------------------------------------------------
_BUILD_HELPER = """
import glob, os, sys
from triton.backends.nvidia.driver import CudaUtils
try:
    CudaUtils()
except Exception as exc:  # loading may fail where no driver is; the built file is in the cache already
    print(f"loading the helper: {type(exc).__name__}: {exc}", file=sys.stderr)
found = glob.glob(os.path.join(os.environ["TRITON_CACHE_DIR"], "*", "cuda_utils*.so"))
print("\\n".join(found))
"""


def _helper_source() -> Path | None:
    root = triton_dir()
    path = root / "backends" / "nvidia" / "driver.c" if root is not None else None
    return path if path is not None and path.is_file() else None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _build_helper(cache: Path, source_sha: str, *, sandboxed: bool, gpu: bool) -> Path | None:
    """Have Triton build its helper in a confined process; move it into ``cache`` with its SHA-256."""
    work = Path(tempfile.mkdtemp(prefix="cak-triton-helper-"))
    os.chmod(work, 0o777)
    try:
        env = {"TRITON_CACHE_DIR": "/scratch/cache" if sandboxed else str(work / "cache"), "TRITON_HOME": "/scratch"}
        command = [sys.executable, "-c", _BUILD_HELPER]
        if sandboxed:
            done = run_confined(ConfinedSpec(scratch=work, gpu=gpu, env=env), command, _HELPER_TIMEOUT_S)
            found = [work / Path(p).relative_to("/scratch") for p in done.stdout.split() if p.startswith("/scratch/")]
        else:
            done = subprocess.run(command, capture_output=True, text=True, timeout=_HELPER_TIMEOUT_S,
                                  env={**os.environ, **env})
            found = [Path(p) for p in done.stdout.split() if p.endswith(".so")]
        found = [p for p in found if p.is_file() and not p.is_symlink()]
        if not found:
            log.warning("Triton's runtime helper was not built: %s", (done.stdout + (done.stderr or ""))[-2000:])
            return None
        cache.mkdir(parents=True, exist_ok=True)
        staged = cache / f".cuda_utils.{os.getpid()}.so"
        shutil.copyfile(found[0], staged)
        (cache / "helper.json").write_text(json.dumps({"source_sha256": source_sha, "sha256": _sha256(staged)}))
        os.replace(staged, cache / "cuda_utils.so")
        return cache / "cuda_utils.so"
    except (OSError, subprocess.SubprocessError, SandboxError) as exc:
        log.warning("Triton's runtime helper was not built: %s", exc)
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def helper_cache_dir(cache_root: Path, source_sha: str) -> Path:
    """Where the helper built from the driver.c of SHA-256 ``source_sha`` for this Python is cached."""
    key = hashlib.sha256(f"{source_sha}|{sys.version}|{sysconfig.get_config_var('EXT_SUFFIX')}".encode()).hexdigest()
    return cache_root / "triton-helper" / key[:32]


def stage_helper(scratch: Path, cache_root: Path, *, sandboxed: bool, gpu: bool) -> str:
    """Put Triton's runtime helper into ``scratch``/.jit (building it once per host and Triton); returns a note for
    the result. Without it a Triton kernel still compiles, but cannot launch."""
    source = _helper_source()
    if source is None:
        return "Triton is not installed here: its kernels cannot run"
    source_sha = _sha256(source)
    cache = helper_cache_dir(cache_root, source_sha)
    built = cache / "cuda_utils.so"
    try:
        meta = json.loads((cache / "helper.json").read_text())
        valid = built.is_file() and meta.get("source_sha256") == source_sha and meta.get("sha256") == _sha256(built)
    except (OSError, ValueError, AttributeError):
        valid = False
    if not valid:
        built = _build_helper(cache, source_sha, sandboxed=sandboxed, gpu=gpu)
        if built is None:
            return "Triton's runtime helper could not be built here: Triton kernels compile but cannot launch"
    target = scratch / HELPER_DIR
    # Rationale: the single-file build ran the candidate's code with this scratch folder writable; whatever it left
    # at this name (a symlink to a host folder, say) is removed, never followed, before the judge writes here.
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    target.mkdir(mode=0o755)
    _write_new(target / "cuda_utils.so", built.read_bytes())
    _write_new(target / "index.json", json.dumps({source_sha: {"file": "cuda_utils.so"}}).encode())
    return "Triton: kernels compile at their first launch (ptxas through the evaluator's compile broker)"


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
