"""Build a workspace's kernels into a shared library, fast and incrementally.

Why it is fast: kernel files include only ``cuda_agent.h`` (no torch headers), so one translation unit compiles
in about 1.5 s on a 16-core host (benchmarks/results/compile.json); each object is cached by the hash of
everything that goes into it (source, headers, flags, nvcc version, architecture), so an edit recompiles only the
edited file, an unchanged workspace rebuilds nothing, and workspaces share objects. Outputs are written to
temporary names and renamed into place, so concurrent builds of different (or the same) workspaces never see each
other's half-written files.

Why the cache can be trusted: the compiler (confined by the caller's ``runner``) writes only into a private staging
folder; this process, which runs no model-written code, moves each object into the cache with a record of its
SHA-256 and of the kernels ptxas compiled into it, and checks the SHA-256 again whenever it reuses the object. A
cached object that changed is compiled again.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from cuda_agent.compiler import diagnostics
from cuda_agent.compiler.toolchain import (
    cublas_flags,
    cuda_home,
    cudnn_paths,
    detect_arch,
    gencode_flags,
    link_name,
    normalize_arch,
    nvcc_path,
    nvcc_version,
)
from cuda_agent.errors import BuildError

log = logging.getLogger(__name__)

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc")
HEADER_SUFFIXES = (".cuh", ".h", ".hpp", ".inl")
_PACKAGE_DIR = Path(__file__).resolve().parent
INFRA_INCLUDE = _PACKAGE_DIR.parent / "workspace" / "infra" / "include"
REGISTRY_SOURCE = _PACKAGE_DIR / "registry.cpp"

Runner = Callable[[Sequence[str], Path, float], "subprocess.CompletedProcess[str]"]


def run_local(cmd: Sequence[str], cwd: Path, timeout: float) -> "subprocess.CompletedProcess[str]":
    """Run a compiler command on this machine (the default runner; the sandbox offers a confined one)."""
    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class BuildResult:
    """What a build produced. ``diagnostics`` is the readable error text when ``ok`` is false."""

    ok: bool
    library: Path | None
    seconds: float
    compiled: tuple[str, ...] = ()
    reused: tuple[str, ...] = ()
    diagnostics: str = ""
    log: str = ""
    arch: str = ""
    kernels: tuple[str, ...] = ()

    def raise_for_errors(self) -> "BuildResult":
        if not self.ok:
            raise BuildError(f"build failed:\n{self.diagnostics}", diagnostics=self.diagnostics, log=self.log)
        return self

    @classmethod
    def from_dict(cls, data: dict, *, local: bool = True) -> "BuildResult":
        """The inverse of `to_dict`. ``local=False`` drops the library path: it names a file on another machine
        (a Ray build node, an HTTP service)."""
        library = data.get("library") if local else None
        return cls(
            ok=bool(data["ok"]),
            library=Path(library) if library else None,
            seconds=float(data.get("seconds", 0.0)),
            compiled=tuple(data.get("compiled", ())),
            reused=tuple(data.get("reused", ())),
            diagnostics=data.get("diagnostics", ""),
            log=data.get("log", ""),
            arch=data.get("arch", ""),
            kernels=tuple(data.get("kernels", ())),
        )

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "library": str(self.library) if self.library else None,
            "seconds": self.seconds,
            "compiled": list(self.compiled),
            "reused": list(self.reused),
            "diagnostics": self.diagnostics,
            "log": self.log,
            "arch": self.arch,
            "kernels": list(self.kernels),
        }


@dataclass(frozen=True)
class BuildConfig:
    """How to compile.

    Attributes:
        arch: compute capability ('90', 'sm_90', '90a'); None detects the GPU's.
        cache_dir: where objects and libraries are kept; shared by every workspace on the machine.
        jobs: parallel compiler processes; None uses the CPU count.
        timeout_s: limit for each compiler call.
        extra_cflags: more nvcc flags (e.g. '-lineinfo').
    """

    arch: str | None = None
    cache_dir: Path | None = None
    jobs: int | None = None
    timeout_s: float = 300.0
    extra_cflags: tuple[str, ...] = field(default_factory=tuple)


def default_cache_dir() -> Path:
    env = os.environ.get("CUDA_AGENT_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cuda-agent"
    return base / "build"


def _sha(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()


def _staged(final: Path, staging: Path | None) -> Path:
    """A fresh temporary path for ``final``'s content: in ``staging`` (what a confined compiler may write) or
    beside ``final``."""
    folder = staging if staging is not None else final.parent
    folder.mkdir(parents=True, exist_ok=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=final.name + ".", suffix=".tmp", dir=folder)
    os.close(fd)
    return Path(tmp)


# Anchored at a line's start: a source's own `#pragma message` or `#warning` text cannot pass for ptxas's line.
_ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '([^']+)' for", re.MULTILINE)
_PTXAS_INFO = re.compile(r"^ptxas info\s*:|^\s*bytes stack frame|^\s*Compile time = ")


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _commit(tmp: Path, final: Path, kernels: Sequence[str] = ()) -> None:
    """Move a compiler output into the cache with its record (SHA-256 and the kernels in it)."""
    record = {"sha256": _file_sha(tmp), "kernels": list(kernels)}
    meta = final.with_name(final.name + ".json")
    fd, meta_tmp = tempfile.mkstemp(prefix=meta.name + ".", suffix=".tmp", dir=final.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh)
    os.replace(tmp, final)
    os.replace(meta_tmp, meta)


def cached_record(final: Path) -> dict | None:
    """The record of a cached object or library whose content still matches it; None when absent or changed."""
    meta = final.with_name(final.name + ".json")
    try:
        record = json.loads(meta.read_text())
        if final.is_file() and _file_sha(final) == record.get("sha256"):
            return record
    except (OSError, ValueError):
        pass
    if final.exists():
        log.warning("cached build output %s does not match its record; compiling it again", final)
    return None


def _compile_flags(arch: str, extra: Sequence[str], kernels_dir: Path) -> list[str]:
    flags = [
        "-O3",
        "-std=c++17",
        "-Xcompiler=-fPIC,-O2",
        "--expt-relaxed-constexpr",
        "-lineinfo",
        "-Xptxas=-v",  # ptxas names every kernel it compiles: the trusted list of the workspace's own kernels
        *gencode_flags(arch),
        f"-I{INFRA_INCLUDE}",
        f"-I{kernels_dir}",
    ]
    cudnn = cudnn_paths()
    if cudnn:
        flags.append(f"-I{cudnn[0]}")
    flags += cublas_flags()[0]
    return flags + list(extra)


def _libraries_for(sources: dict[str, bytes], headers: dict[str, bytes]) -> list[str]:
    text = b"\n".join([*sources.values(), *headers.values()])
    libs: list[str] = []
    if b"cublas" in text:
        libs += cublas_flags()[1]
    if b"cudnn" in text:
        paths = cudnn_paths()
        if paths:
            libs += [f"-L{paths[1]}", f"-Xlinker=-rpath,{paths[1]}", link_name(paths[1], "cudnn")]
        else:
            libs.append("-lcudnn")
    return libs


def _read_tree(kernels_dir: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    sources: dict[str, bytes] = {}
    headers: dict[str, bytes] = {}
    if not kernels_dir.is_dir():
        return sources, headers
    for path in sorted(kernels_dir.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(kernels_dir.parent).as_posix()
        if path.suffix in SOURCE_SUFFIXES:
            sources[rel] = path.read_bytes()
        elif path.suffix in HEADER_SUFFIXES:
            headers[rel] = path.read_bytes()
    return sources, headers


def build_workspace(
    root: str | Path,
    *,
    arch: str | None = None,
    cache_dir: str | Path | None = None,
    jobs: int | None = None,
    runner: Runner | None = None,
    config: BuildConfig | None = None,
    staging: str | Path | None = None,
) -> BuildResult:
    """Compile ``root/kernels`` into a shared library and return where it is.

    ``runner`` runs each compiler command (default: on this machine; `cuda_agent.sandbox.sandboxed_runner` confines
    it). ``staging``: the folder compiler outputs are written to before they are checked and moved into the cache
    (the only folder a confined compiler needs to write); default: beside the cache entries.

    Never raises for compiler errors: they come back in ``BuildResult.diagnostics`` (first error first, with file
    and line) because the agent acts on them. Raises `BuildError` only when the toolchain itself is missing.
    """
    started = time.perf_counter()
    config = config or BuildConfig()
    root = Path(root).resolve()
    arch = normalize_arch(arch or config.arch or detect_arch())
    cache = Path(cache_dir or config.cache_dir or default_cache_dir()).resolve()
    run = runner or run_local
    kernels_dir = root / "kernels"
    sources, headers = _read_tree(kernels_dir)
    if not sources:
        return BuildResult(False, None, time.perf_counter() - started, diagnostics=(
            f"no kernel sources in {kernels_dir}: write at least one .cu file that includes \"cuda_agent.h\" "
            "and exports a function with CA_EXPORT(name)"), arch=arch)

    flags = _compile_flags(arch, config.extra_cflags, kernels_dir)
    toolchain_id = _sha(nvcc_path(), nvcc_version(), " ".join(flags).replace(str(kernels_dir), "<kernels>"))
    infra_hash = _sha((INFRA_INCLUDE / "cuda_agent.h").read_bytes())
    header_hash = _sha(infra_hash, *(f"{k}\n".encode() + v for k, v in sorted(headers.items())))

    jobs_list: list[tuple[str, Path, Path]] = []  # (label, source path, object path)
    reg_key = _sha(toolchain_id, REGISTRY_SOURCE.read_bytes())
    jobs_list.append(("<registry>", REGISTRY_SOURCE, cache / "obj" / f"{reg_key}.o"))
    for rel, content in sources.items():
        key = _sha(toolchain_id, header_hash, rel, content)
        jobs_list.append((rel, root / rel, cache / "obj" / f"{key}.o"))

    compiled: list[str] = []
    failures: list[str] = []
    logs: list[str] = []
    stage_dir = Path(staging).resolve() if staging is not None else None
    records = {obj: cached_record(obj) for _, _, obj in jobs_list}
    todo = [job for job in jobs_list if records[job[2]] is None]
    reused = [label for label, _, obj in jobs_list if records[obj] is not None and label != "<registry>"]
    kernels: list[str] = []

    def compile_one(job: tuple[str, Path, Path]) -> tuple[str, bool, str]:
        label, source, obj = job
        tmp = _staged(obj, stage_dir)
        src_arg = source.relative_to(root).as_posix() if label != "<registry>" else str(source)
        cmd = [nvcc_path(), "-c", src_arg, "-o", str(tmp), *flags]
        if source.suffix in (".cpp", ".cc"):
            cmd += ["-x", "cu"] if b"__global__" in source.read_bytes() else []
        try:
            proc = run(cmd, root, config.timeout_s)
        except subprocess.TimeoutExpired:
            tmp.unlink(missing_ok=True)
            return label, False, f"{label}: the compiler ran past {config.timeout_s:.0f} s and was stopped"
        output = (proc.stdout or "") + (proc.stderr or "")
        if proc.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            tmp.unlink(missing_ok=True)
            return label, False, output or f"{label}: compiler exited with {proc.returncode}"
        entries = list(dict.fromkeys(_ENTRY.findall(output)))
        _commit(tmp, obj, entries)
        records[obj] = {"kernels": entries}
        return label, True, "\n".join(line for line in output.splitlines() if not _PTXAS_INFO.search(line))

    if todo:
        workers = max(1, min(len(todo), jobs or config.jobs or os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for label, ok, output in pool.map(compile_one, todo):
                if output.strip():
                    logs.append(output.strip())
                if ok:
                    if label != "<registry>":
                        compiled.append(label)
                else:
                    failures.append(output)
    if failures:
        text = "\n".join(failures)
        return BuildResult(False, None, time.perf_counter() - started, tuple(compiled), tuple(reused),
                           diagnostics.summarize(text), "\n".join(logs)[-20000:], arch)

    for _, _, obj in jobs_list:
        kernels.extend((records.get(obj) or {}).get("kernels", ()))
    objects = [obj for _, _, obj in jobs_list]
    link_flags = ["-cudart=shared", f"-Xlinker=-rpath,{cuda_home() / 'lib64'}", *_libraries_for(sources, headers)]
    lib_key = _sha(toolchain_id, *(o.name for o in objects), " ".join(link_flags))
    library = cache / "lib" / f"libca_{lib_key[:24]}.so"
    if cached_record(library) is None:
        tmp = _staged(library, stage_dir)
        cmd = [nvcc_path(), "-shared", *gencode_flags(arch), "-o", str(tmp), *map(str, objects), *link_flags]
        proc = run(cmd, root, config.timeout_s)
        output = (proc.stdout or "") + (proc.stderr or "")
        if proc.returncode != 0 or not tmp.exists():
            tmp.unlink(missing_ok=True)
            named = {str(obj): label for label, _, obj in jobs_list}
            return BuildResult(False, None, time.perf_counter() - started, tuple(compiled), tuple(reused),
                               diagnostics.summarize_link(output, named), output[-20000:], arch)
        if output.strip():
            logs.append(output.strip())
        _commit(tmp, library)
    seconds = time.perf_counter() - started
    log.info("built %s in %.2f s (compiled %d, reused %d)", root, seconds, len(compiled), len(reused))
    return BuildResult(True, library, seconds, tuple(compiled), tuple(reused), "", "\n".join(logs)[-20000:], arch,
                       tuple(dict.fromkeys(kernels)))
