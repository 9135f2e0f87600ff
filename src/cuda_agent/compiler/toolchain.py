"""Find nvcc and the CUDA libraries, and pick the GPU architecture to build for."""
from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from pathlib import Path

from cuda_agent.errors import BuildError

log = logging.getLogger(__name__)

DEFAULT_ARCH = "90"


@functools.lru_cache(maxsize=1)
def nvcc_path() -> str:
    """The nvcc to use: ``$CUDA_AGENT_NVCC``, ``$CUDA_HOME/bin/nvcc``, the one on PATH, or /usr/local/cuda."""
    candidates = [os.environ.get("CUDA_AGENT_NVCC")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(str(Path(os.environ[var]) / "bin" / "nvcc"))
    candidates += [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise BuildError(
        "nvcc not found: install the CUDA toolkit, or set CUDA_HOME (or CUDA_AGENT_NVCC) to point at it"
    )


@functools.lru_cache(maxsize=1)
def nvcc_version() -> str:
    out = subprocess.run([nvcc_path(), "--version"], capture_output=True, text=True, timeout=60)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "unknown"


def cuda_home() -> Path:
    return Path(nvcc_path()).resolve().parent.parent


def normalize_arch(arch: str | int) -> str:
    """'sm_90', '9.0', '90', 90, '90a' -> '90' / '90a'."""
    text = str(arch).strip().lower().removeprefix("sm_").removeprefix("compute_")
    if "." in text:
        major, minor = text.split(".", 1)
        text = major + minor
    if not text.rstrip("a").isdigit():
        raise BuildError(f"unknown GPU architecture {arch!r}: use a compute capability such as 90, sm_90 or 9.0")
    return text


@functools.lru_cache(maxsize=1)
def detect_arch() -> str:
    """The compute capability of GPU 0 (``$CUDA_AGENT_ARCH`` wins), else nvidia-smi's, else sm_90 (H100/H200)."""
    if os.environ.get("CUDA_AGENT_ARCH"):
        return normalize_arch(os.environ["CUDA_AGENT_ARCH"])
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
        )
        caps = [c.strip() for c in out.stdout.splitlines() if c.strip()]
        if out.returncode == 0 and caps:
            return normalize_arch(caps[0])
    except (OSError, subprocess.SubprocessError):
        pass
    log.info("no GPU found to detect the architecture; building for sm_%s (set CUDA_AGENT_ARCH to change)", DEFAULT_ARCH)
    return DEFAULT_ARCH


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU here (False without torch): whether kernels can be run, verified and timed on
    this machine, as opposed to only built. torch is imported on the call, so importing this module stays cheap."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def gencode_flags(arch: str) -> list[str]:
    arch = normalize_arch(arch)
    return [f"-gencode=arch=compute_{arch},code=[sm_{arch},compute_{arch}]"]


def _wheel_root(package: str) -> Path | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return None


def link_name(lib_dir: Path, name: str) -> str:
    """``-lname`` where an unversioned .so exists, else ``-l:libname.so.N`` (wheels ship only the versioned file)."""
    if (lib_dir / f"lib{name}.so").exists():
        return f"-l{name}"
    versioned = sorted(lib_dir.glob(f"lib{name}.so.*"), key=lambda p: len(p.name))
    return f"-l:{versioned[0].name}" if versioned else f"-l{name}"


def cublas_flags() -> tuple[list[str], list[str]]:
    """(compile flags, link flags) for cuBLAS: the toolkit's, or the one PyTorch's CUDA wheels bring."""
    home = cuda_home()
    if (home / "include" / "cublas_v2.h").exists():
        lib = home / "lib64"
        return [], [f"-L{lib}", link_name(lib, "cublas"), link_name(lib, "cublasLt")]
    for package in ("nvidia.cu13", "nvidia.cublas", "nvidia.cu12"):
        root = _wheel_root(package)
        if root and (root / "include" / "cublas_v2.h").exists():
            lib = root / "lib"
            return [f"-I{root / 'include'}"], [f"-L{lib}", link_name(lib, "cublas"), link_name(lib, "cublasLt"),
                                               f"-Xlinker=-rpath,{lib}"]
    return [], ["-lcublas", "-lcublasLt"]


def cudnn_paths() -> tuple[Path, Path] | None:
    """Include and library folders of cuDNN: the toolkit's, or the one PyTorch's wheels bring."""
    home = cuda_home()
    if (home / "include" / "cudnn.h").exists():
        return home / "include", home / "lib64"
    for name in ("nvidia.cudnn", "nvidia.cu13"):
        root = _wheel_root(name)
        if root and (root / "include" / "cudnn.h").exists():
            return root / "include", root / "lib"
    return None
