"""Can bubblewrap make the namespaces the sandbox needs here? Asked once per process and per identity."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox._layout import drop_privileges_prefix, namespace_args

HOW_TO_FIX = (
    "install bubblewrap (Debian/Ubuntu: apt-get install -y bubblewrap) and allow unprivileged user namespaces "
    "(sysctl -w kernel.unprivileged_userns_clone=1 and user.max_user_namespaces>0; on Ubuntu 24.04 also "
    "kernel.apparmor_restrict_unprivileged_userns=0; in Docker run with --security-opt seccomp=unconfined "
    "--security-opt apparmor=unconfined, or --privileged)"
)


def resolve_identity(identity: str) -> str:
    """``auto`` becomes ``setuid`` for a root host (so the process limit is enforced) and ``userns`` otherwise."""
    if identity not in ("auto", "userns", "setuid"):
        raise SandboxError(f"sandbox identity must be auto, userns or setuid, got {identity!r}")
    if identity == "auto":
        return "setuid" if os.geteuid() == 0 else "userns"
    if identity == "setuid" and os.geteuid() != 0:
        raise SandboxError("sandbox identity 'setuid' needs a root host process; use 'userns' or 'auto'")
    return identity


def bwrap_path() -> str:
    """``$CUDA_AGENT_BWRAP`` (a bwrap binary unpacked anywhere, e.g. from the Debian package on a GPU node that has
    none installed), else the ``bwrap`` on PATH."""
    configured = os.environ.get("CUDA_AGENT_BWRAP")
    if configured:
        if not os.access(configured, os.X_OK):
            raise SandboxError(f"CUDA_AGENT_BWRAP={configured} is not an executable file; point it at a bwrap binary")
        return configured
    path = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else None)
    if path is None:
        raise SandboxError(f"bubblewrap (bwrap) is not installed on this machine; {HOW_TO_FIX}")
    return path


@functools.lru_cache(maxsize=4)
def _probe(identity: str) -> str:
    """Empty when bwrap works with ``identity``'s namespaces, else bwrap's complaint."""
    try:
        bwrap = bwrap_path()
    except SandboxError as exc:
        return str(exc)
    cmd = [bwrap, *namespace_args(identity), "--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/lib", "/lib64"):
        if os.path.islink(link):
            cmd += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            cmd += ["--ro-bind", link, link]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--"]
    if identity == "setuid":
        cmd += drop_privileges_prefix(65534)
    cmd += ["/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run bwrap: {exc}"
    if done.returncode != 0:
        return (done.stderr or done.stdout or f"exit status {done.returncode}").strip()
    return ""


def check_sandbox(identity: str = "auto") -> str:
    """Return the resolved identity, or raise `SandboxError` saying what is missing and how to fix it."""
    resolved = resolve_identity(identity)
    problem = _probe(resolved)
    if problem:
        raise SandboxError(f"bubblewrap cannot create the sandbox's namespaces ({resolved}): {problem}; {HOW_TO_FIX}")
    return resolved


def sandbox_available(identity: str = "auto") -> bool:
    """Whether `Sandbox` can run here (bubblewrap installed and able to make namespaces)."""
    try:
        check_sandbox(identity)
    except SandboxError:
        return False
    return True
