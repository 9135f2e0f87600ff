"""`sandboxed_runner`: run the build's compiler commands inside a sandbox too.

A kernel file is the agent's text, and the compiler reads whatever it names: ``#include "/etc/passwd"`` (or another
episode's file) would come back through the compiler's error messages. Inside this sandbox only the toolchain, the
workspace and the folders the build names are visible. The workspace and the cache are bound at their host paths,
so the build's command lines (made of host paths) work unchanged.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Callable, Sequence

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox._exec import run_bwrap
from cuda_agent.sandbox._layout import (Layout, compiler_roots, cuda_roots, inside_path_env, namespace_args,
                                        python_roots)
from cuda_agent.sandbox._limits import GiB, MiB, SandboxLimits
from cuda_agent.sandbox._probe import bwrap_path, check_sandbox

Runner = Callable[[Sequence[str], Path, float], "subprocess.CompletedProcess[str]"]

BUILD_LIMITS = SandboxLimits(timeout_s=600, cpu_seconds=1200, memory_bytes=32 * GiB, max_processes=None,
                             max_file_bytes=2 * GiB, disk_quota_bytes=None, tmp_bytes=4 * GiB,
                             max_output_bytes=1 * MiB, output_kill_bytes=64 * MiB)
_PATH_FLAGS = ("-I", "-isystem", "-L", "--include-path=", "--library-path=", "-include")


def _host_paths(argv: Sequence[str]) -> list[str]:
    """Existing absolute paths named by the build's own command line (include folders, sources, the registry
    file): the build is trusted, the sources' contents are not."""
    found: list[str] = []
    for arg in argv[1:]:
        for flag in ("", *_PATH_FLAGS):
            if arg.startswith(flag) and arg[len(flag):].startswith("/"):
                path = arg[len(flag):]
                if os.path.exists(path):
                    found.append(os.path.realpath(path))
                break
    return found


def sandboxed_runner(workspace: str | Path, *, extra_rw: Sequence[str | Path] = (),
                     extra_ro: Sequence[str | Path] = (), protected: Sequence[str] = (),
                     limits: SandboxLimits | None = None, readonly_workspace: bool = False) -> Runner:
    """A ``runner(argv, cwd, timeout) -> CompletedProcess`` for `cuda_agent.compiler.build_workspace`.

    Args:
        workspace: bound read-write at its own path, with ``protected`` (workspace-relative paths) read-only on
            top; the builds of this package protect none: the compiler binds the workspace read-only, the inline
            build a work folder of its own.
        extra_rw: folders the build writes (the compile cache); made if missing.
        extra_ro: more folders the build reads; existing paths in the command line are added automatically.
        readonly_workspace: bind the workspace read-only (the evaluator's builds write only to ``extra_rw``).
        limits: default `BUILD_LIMITS` (no process limit: compilers do not fork-bomb, and wall time still holds).

    Always runs as uid 65534 in a user namespace (so files it writes belong to the host user and the shared cache
    stays writable by every build). Raises `SandboxError` (at call time) when bubblewrap cannot run here.
    """
    check_sandbox("userns")
    ws = Path(workspace).resolve()
    rw = [str(Path(p).resolve()) for p in extra_rw]
    for path in rw:
        os.makedirs(path, exist_ok=True)
    ro = [str(Path(p).resolve()) for p in extra_ro]
    limits = limits or BUILD_LIMITS
    prot = tuple(p.rstrip("/") for p in protected)

    def run(argv: Sequence[str], cwd: Path, timeout: float) -> "subprocess.CompletedProcess[str]":
        bound = [str(ws), *rw, *ro, "/usr", *python_roots(), *cuda_roots(), *compiler_roots()]
        auto = [p for p in _host_paths(argv) if not any(p == b or p.startswith(b + "/") for b in bound)]
        layout = Layout(ws, str(ws), protected=prot, workspace_readonly=readonly_workspace,
                        writable_inside_protected=() if readonly_workspace else (".cuda_agent/build",),
                        ro=tuple(dict.fromkeys([*ro, *auto])), rw=tuple(rw), tmp_bytes=limits.tmp_bytes,
                        chdir=str(Path(cwd).resolve()),
                        env={"PATH": inside_path_env(), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                             **{k: os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(k)}})
        report_r, report_w = os.pipe()
        os.set_inheritable(report_w, True)
        bwrap = [bwrap_path(), *namespace_args("userns"), *layout.args()]
        script = "ulimit -c 0; " + (f"ulimit -v {limits.memory_bytes // 1024}; " if limits.memory_bytes else "") + \
            (f"ulimit -f {limits.max_file_bytes // 1024}; " if limits.max_file_bytes else "") + \
            (f"ulimit -t {limits.cpu_seconds}; " if limits.cpu_seconds else "") + f'exec {report_w}>&-; exec "$@"'
        full = [*bwrap, "--", "/bin/bash", "-c", script, "build", *map(str, argv)]
        try:
            # env={}: bubblewrap's init is readable from the sandbox (/proc/1/environ), so it holds nothing.
            raw = run_bwrap(full, report_w=report_w, report_r=report_r, limits=limits, timeout=timeout,
                            stdin_data=None, check=lambda: "", env={})
        except OSError as exc:
            raise SandboxError(f"cannot start bubblewrap for a build in {ws}: {exc}") from exc
        if raw.killed_reason == "timeout":
            raise subprocess.TimeoutExpired(list(map(str, argv)), timeout, raw.stdout.text(), raw.stderr.text())
        return subprocess.CompletedProcess(list(map(str, argv)), raw.returncode, raw.stdout.text(),
                                           raw.stderr.text())

    return run
