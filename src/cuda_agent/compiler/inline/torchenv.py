"""What torch's ``load_inline`` would put on its compiler command lines, read from torch itself.

We ask the installed torch to write the ninja file it would build an extension from (a throwaway one named
``cak_probe``) and read its ``cflags``, ``cuda_cflags``, ``ldflags``, ``cxx`` and ``nvcc`` lines: that is what makes
our objects compatible with (and built like) torch's own, on torch 2.4 through 2.14 (C++17 or C++20, ``-ccbin $CC``,
the include folders). That helper is private to torch, so the probe falls back to assembling the same flags from
torch's public pieces when it is missing. The probe runs in a subprocess (importing torch takes seconds and we do
not want torch in the build pool's process) and its answer is cached per interpreter and environment.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from cuda_agent.errors import BuildError

log = logging.getLogger(__name__)

_PROBE = r'''
import inspect, json, os, re, shlex, sys, tempfile, sysconfig
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
import torch
from torch.utils import cpp_extension as ce
out = {"torch_version": torch.__version__, "torch_cuda": torch.version.cuda or "", "source": "ninja"}
work = tempfile.mkdtemp(prefix="cak-probe-")
sources = [os.path.join(work, "main.cpp"), os.path.join(work, "cuda.cu")]
try:
    prep = inspect.signature(ce._prepare_ldflags).parameters
    args = {"extra_ldflags": [], "with_cuda": True, "verbose": False, "is_standalone": False}
    if "with_sycl" in prep:
        args["with_sycl"] = False
    ld = ce._prepare_ldflags(**{k: v for k, v in args.items() if k in prep})
    params = inspect.signature(ce._write_ninja_file_to_build_library).parameters
    kw = dict(path=os.path.join(work, "build.ninja"), name="cak_probe", sources=sources, extra_cflags=[],
              extra_cuda_cflags=[], extra_ldflags=ld, extra_include_paths=[], with_cuda=True, is_standalone=False,
              extra_sycl_cflags=[], with_sycl=False)
    ce._write_ninja_file_to_build_library(**{k: v for k, v in kw.items() if k in params})
    text = open(kw["path"]).read()
    def var(name):
        m = re.search(r"^" + name + r" = ?(.*)$", text, re.M)
        return m.group(1) if m else ""
    for key in ("cflags", "cuda_cflags", "ldflags", "cxx", "nvcc"):
        out[key] = var(key)
except Exception as exc:  # fall back to torch's public pieces
    std = "-std=c++20" if "c++20" in inspect.getsource(ce) else "-std=c++17"
    inc = ce.include_paths("cuda") + [sysconfig.get_path("include", scheme="posix_prefix")]
    common = "-DTORCH_EXTENSION_NAME=cak_probe -DTORCH_API_INCLUDE_EXTENSION_H " + " ".join("-isystem " + shlex.quote(p) for p in inc)
    out.update(source="public:" + type(exc).__name__, cflags=common + " -fPIC " + std,
               cuda_cflags=common + " " + " ".join(ce.COMMON_NVCC_FLAGS) + " --compiler-options '-fPIC' " + std,
               ldflags="-shared " + " ".join("-L" + p for p in ce.library_paths("cuda")) +
               " -lc10 -lc10_cuda -ltorch_cpu -ltorch_cuda -ltorch -ltorch_python -lcudart",
               cxx=os.environ.get("CXX", "c++"), nvcc=os.path.join(ce.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc"))
print("CAK_PROBE" + json.dumps(out))
'''


@dataclass(frozen=True)
class TorchEnv:
    """torch's compiler command lines for an extension, without the per-extension parts (name, arch).

    ``host_cc`` and ``nvcc_host_flags`` are what nvcc itself uses for the host half of a .cu file (its
    ``-ccbin`` compiler and the include folders it adds), read from ``nvcc --dryrun``.
    """

    torch_version: str
    torch_cuda: str
    python: str
    cxx: tuple[str, ...]
    nvcc: str
    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    host_cc: str
    nvcc_host_flags: tuple[str, ...]
    versions: str
    source: str

    def key(self) -> str:
        """Everything that makes objects from this toolchain differ from another's."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()

    @property
    def std(self) -> str:
        stds = [f for f in self.cflags if f.startswith("-std=")]
        return stds[-1] if stds else "-std=c++17"


def _strip_probe(tokens: list[str]) -> list[str]:
    out = []
    for token in tokens:
        if token.startswith("-DTORCH_EXTENSION_NAME=") or token.startswith(("-gencode=", "--generate-code=")):
            continue
        out.append(token)
    return out


def _nvcc_host(nvcc: str, cuda_cflags: list[str]) -> tuple[str, list[str]]:
    """The host compiler nvcc runs for .cu files and the include flags it adds, from a dry run."""
    ccbin: list[str] = []
    if "-ccbin" in cuda_cflags:
        i = cuda_cflags.index("-ccbin")
        ccbin = cuda_cflags[i:i + 2]
    proc = subprocess.run([nvcc, *ccbin, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                          capture_output=True, text=True, timeout=60)
    for line in (proc.stdout + proc.stderr).splitlines():
        line = line.removeprefix("#$ ").strip()
        if " -E " in f" {line} " and "-D__CUDACC__" in line and "__CUDA_ARCH__=" not in line:
            argv = shlex.split(line)
            flags: list[str] = []
            for i, token in enumerate(argv):
                if token in ("-isystem", "-I") and i + 1 < len(argv):
                    flags += [token, argv[i + 1]]
                elif token.startswith("-I") and len(token) > 2:
                    flags.append(token)
            return argv[0], flags
    raise BuildError(f"cannot read nvcc's host compiler from `{nvcc} --dryrun`: {proc.stderr.strip()[-500:]}")


def toolkit_root(nvcc: str) -> Path:
    """The CUDA toolkit nvcc belongs to (its ``TOP``, from a dry run): ``nvcc`` may be a wrapper script or a link
    outside the toolkit, so its own folder does not say. Raises `BuildError` when nvcc does not answer."""
    try:
        proc = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot run {nvcc}: {exc}") from exc
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("#$ TOP="):
            return Path(os.path.realpath(line.removeprefix("#$ TOP=").strip()))
    raise BuildError(f"`{nvcc} --dryrun` does not name its toolkit")


def _versions(cxx: list[str], host_cc: str, nvcc: str) -> str:
    parts = []
    for argv in (cxx, [host_cc], [nvcc]):
        try:
            out = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60).stdout
        except OSError as exc:
            raise BuildError(f"cannot run {argv[0]}: {exc}") from exc
        parts.append(out.strip())
    return "\n".join(parts)


def _env_fingerprint(python: str) -> str:
    keys = ("CC", "CXX", "CUDA_HOME", "CUDA_PATH", "PATH", "TORCH_EXTENSIONS_DIR", "LD_LIBRARY_PATH")
    return hashlib.sha256(json.dumps([python, *(os.environ.get(k, "") for k in keys)]).encode()).hexdigest()[:24]


def _probe(python: str) -> TorchEnv:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=300, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot ask torch for its extension flags with {python}: {exc}") from exc
    line = next((l for l in proc.stdout.splitlines() if l.startswith("CAK_PROBE")), None)
    if proc.returncode != 0 or line is None:
        raise BuildError(f"torch's extension flags could not be read with {python} (is torch installed?):\n"
                         f"{proc.stderr.strip()[-2000:]}")
    data = json.loads(line.removeprefix("CAK_PROBE"))
    cuda_cflags = _strip_probe(shlex.split(data["cuda_cflags"]))
    nvcc = data["nvcc"] or "nvcc"
    host_cc, host_flags = _nvcc_host(nvcc, cuda_cflags)
    cxx = shlex.split(data["cxx"] or "c++")
    return TorchEnv(
        torch_version=data["torch_version"], torch_cuda=data["torch_cuda"], python=python, cxx=tuple(cxx),
        nvcc=nvcc, cflags=tuple(_strip_probe(shlex.split(data["cflags"]))), cuda_cflags=tuple(cuda_cflags),
        ldflags=tuple(shlex.split(data["ldflags"])), host_cc=host_cc, nvcc_host_flags=tuple(host_flags),
        versions=_versions(cxx, host_cc, nvcc), source=data["source"],
    )


@functools.lru_cache(maxsize=4)
def torch_env(python: str | None = None, cache_dir: str | None = None) -> TorchEnv:
    """torch's extension toolchain for ``python`` (default: this interpreter), cached in ``cache_dir``.

    Raises `BuildError` when torch or the compilers cannot be run.
    """
    python = python or sys.executable
    cache_file = None
    if cache_dir:
        cache_file = Path(cache_dir) / "toolchain" / f"{_env_fingerprint(python)}.json"
        torch_stamp = _torch_stamp(python)
        if cache_file.is_file():
            try:
                data = json.loads(cache_file.read_text())
                if data.pop("_stamp", None) == torch_stamp:
                    return TorchEnv(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
            except (ValueError, TypeError):
                log.warning("ignoring an unreadable toolchain cache %s", cache_file)
    found = _probe(python)
    log.info("torch %s toolchain: %s; nvcc host compiler %s (flags from %s)", found.torch_version,
             " ".join(found.cxx), found.host_cc, found.source)
    if cache_file:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**asdict(found), "_stamp": _torch_stamp(python)}))
        os.replace(tmp, cache_file)
    return found


def _torch_stamp(python: str) -> str:
    """Where torch is and when it was installed, without importing it (find_spec does not run torch)."""
    code = "import importlib.util as u, os; s = u.find_spec('torch'); p = s.origin if s else ''; " \
           "print(p, os.stat(p).st_mtime_ns if p else 0)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
