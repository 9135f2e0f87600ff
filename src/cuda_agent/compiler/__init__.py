"""Compile a workspace's kernels into a shared library, fast and incrementally, and load it.

`build_workspace` never imports torch; `cuda_agent.compiler.runtime` (which does) loads the result.
"""
from cuda_agent.compiler.builder import BuildConfig, BuildResult, build_workspace, default_cache_dir, run_local
from cuda_agent.compiler.toolchain import detect_arch, normalize_arch, nvcc_path

__all__ = [
    "BuildConfig",
    "BuildResult",
    "build_workspace",
    "default_cache_dir",
    "detect_arch",
    "normalize_arch",
    "nvcc_path",
    "run_local",
]
