"""`spawn_task_code`: our own trusted code (the judge, a synthesis filter) in a sandbox of its own, because it runs
task code, which is model-written code too.

What it sees: the toolchain, the Python environment and the CUDA libraries read-only; a private copy of the
cuda_agent package (read-only, at `PACKAGE_MOUNT`); the GPU's device nodes and /sys when asked (as the candidate
gets them); the folders the caller names (a job folder read-write, a cache read-only); a private /tmp and
/dev/shm; no network; an environment with nothing of the host's but what CUDA and Python need. No home, no store,
no writable cache, no checkout, no API key exists inside. The candidate's own sandbox is started from inside this
one (nested bubblewrap), so this sandbox leaves user namespaces enabled (the candidate's sets ``--disable-userns``).

Nesting on a root host. bubblewrap covers /proc/sys and three other /proc entries with read-only bind mounts when
its user may write them; inside a nested user namespace those covers are locked mounts, and the kernel then refuses
the nested sandbox its own /proc ("Can't mount proc ... Operation not permitted"). Started with the caller's
primary group dropped to `SANDBOX_GID` (uid unchanged, so every host file root could read stays readable) bubblewrap
finds /proc/sys not writable, makes no cover, and the nested sandbox can mount its /proc (a non-root user needs
nothing: /proc/sys is root's). `nesting_problem` probes it once per process.

Lifetime: ``--die-with-parent`` on the process that spawned it and a PID namespace of its own, so when the owner ends
(SIGKILL included) bubblewrap dies, its namespace's init dies, and the kernel kills every process inside, the
nested candidate's sandbox too.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox._layout import Layout, inside_path_env
from cuda_agent.sandbox._probe import bwrap_path, check_sandbox
from cuda_agent.sandbox.process import PASSED_ENV, gpu_device_nodes

PACKAGE_MOUNT = "/opt/cuda-agent-trusted"
BWRAP_MOUNT = "/opt/cuda-agent-bwrap/bwrap"
SANDBOX_GID = 65534
MARKER_ENV = "CUDA_AGENT_IN_TASK_SANDBOX"
"""Set inside: caches that only a trusted process may write (the baselines) hand their records back instead."""
_DRIVER_DIRS = ("/usr/local/nvidia", "/usr/lib/wsl")


@functools.lru_cache(maxsize=1)
def package_copy() -> str:
    """A private, world-readable copy of the cuda_agent package's Python files (its parent folder): what the
    sandbox imports. A copy, so that no checkout (with its .git, notes and settings) is bound inside, and so that a
    package living under an unreadable home is still importable there."""
    import cuda_agent

    source = Path(cuda_agent.__file__).resolve().parent
    root = Path(tempfile.mkdtemp(prefix="cuda-agent-trusted-"))
    atexit.register(shutil.rmtree, root, True)
    shutil.copytree(source, root / "cuda_agent", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return str(root)


@dataclass
class TaskCodeSpec:
    """What one task-code sandbox sees.

    Attributes:
        rw: host folders bound read-write at their own paths (a job folder).
        ro: host folders or files bound read-only at their own paths (a cache to read, a staged solution).
        gpu: bind the GPU's device nodes, /sys and the driver's folders.
        env: extra environment (on top of a clean one: PATH, HOME=/tmp, TMPDIR, LANG, PYTHONPATH, `PASSED_ENV`).
        tmp_bytes: size of the private /tmp (the candidate's scratch folder lives there).
        cwd: the working folder inside (default /tmp).
        die_with_parent: end the sandbox when the *thread* that started it ends (bubblewrap's
            ``--die-with-parent``, a parent-death signal). Off for a long-lived server started from any thread,
            which then must watch its owner itself (the warm worker reads a pipe whose end closes with its owner).
    """

    rw: Sequence[str] = ()
    ro: Sequence[str] = ()
    gpu: bool = False
    env: dict[str, str] = field(default_factory=dict)
    tmp_bytes: int = 16 << 30
    cwd: str = "/tmp"
    die_with_parent: bool = True


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment inside: nothing of the host's but what CUDA and Python need (no key, token or home)."""
    env = {"PATH": inside_path_env(), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "USER": "judge",
           "LOGNAME": "judge", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": PACKAGE_MOUNT, "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor",
           "TRITON_CACHE_DIR": "/tmp/triton", MARKER_ENV: "1"}
    env.update({k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)})
    if os.environ.get("CUDA_AGENT_BWRAP"):
        env["CUDA_AGENT_BWRAP"] = BWRAP_MOUNT
    env.update(extra or {})
    return env


def task_code_argv(spec: TaskCodeSpec, command: Sequence[str]) -> list[str]:
    """The bubblewrap command line that runs ``command`` as ``spec`` says. Raises SandboxError when bubblewrap
    cannot make namespaces here."""
    check_sandbox("userns")
    bwrap = bwrap_path()
    extra: list[str] = ["--ro-bind", package_copy(), PACKAGE_MOUNT]
    if os.environ.get("CUDA_AGENT_BWRAP"):
        extra += ["--ro-bind", os.path.realpath(bwrap), BWRAP_MOUNT]
    if spec.gpu:
        for node in gpu_device_nodes():
            extra += ["--dev-bind", node, node]
        extra += ["--ro-bind", "/sys", "/sys"]
        for folder in _DRIVER_DIRS:
            if os.path.isdir(folder):
                extra += ["--ro-bind", folder, folder]
    layout = Layout(Path("/tmp"), "/tmp", ro=tuple(os.path.realpath(p) for p in spec.ro if os.path.exists(p)),
                    rw=tuple(os.path.realpath(p) for p in spec.rw), tmp_bytes=spec.tmp_bytes,
                    env=clean_env(spec.env), chdir=spec.cwd, extra_args=tuple(extra))
    # the Layout binds a workspace; here there is none (/tmp is the sandbox's own tmpfs), so that bind is dropped
    args = _without_workspace_bind(layout.args())
    namespaces = ["--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534", "--new-session",
                  "--hostname", "judge", *(["--die-with-parent"] if spec.die_with_parent else [])]
    return [bwrap, *namespaces, *args, "--", *command]


def _without_workspace_bind(args: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in ("--bind", "--ro-bind") and i + 2 < len(args) and args[i + 1] == "/tmp" and args[i + 2] == "/tmp":
            i += 3
            continue
        out.append(args[i])
        i += 1
    return out


def _prepare_child() -> None:
    """In the child, before bubblewrap: SIGCHLD back to its default (a parent that ignores it would pass that on)
    and, on a root host, the primary group dropped (see the module docstring: that is what lets the candidate's
    sandbox nest)."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)


def spawn_task_code(spec: TaskCodeSpec, command: Sequence[str], *, pass_fds: Sequence[int] = (),
                    stdin: int | None = subprocess.DEVNULL, stdout: int | None = None,
                    stderr: int | None = None) -> "subprocess.Popen[bytes]":
    """Start ``command`` in a task-code sandbox, in a session of its own (kill its process group to end it; it also
    ends when the thread that started it ends, unless ``spec.die_with_parent`` is off).

    Raises:
        SandboxError: bubblewrap is missing, cannot make namespaces, or cannot nest a sandbox here.
    """
    problem = nesting_problem()
    if problem:
        raise SandboxError(problem)
    argv = task_code_argv(spec, command)
    try:
        return subprocess.Popen(argv, pass_fds=tuple(pass_fds), stdin=stdin, stdout=stdout, stderr=stderr,
                                start_new_session=True, preexec_fn=_prepare_child, env={})
    except OSError as exc:
        raise SandboxError(f"cannot start bubblewrap for task code: {exc}") from exc


@functools.lru_cache(maxsize=1)
def nesting_problem() -> str:
    """Empty when a sandbox can be started inside a task-code sandbox here (what the judge does for its candidate),
    else why not and what to do."""
    check_sandbox("userns")
    bwrap_inside = BWRAP_MOUNT if os.environ.get("CUDA_AGENT_BWRAP") else bwrap_path()
    inner = [bwrap_inside, "--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534",
             "--die-with-parent", "--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/lib", "/lib64"):
        if os.path.islink(link):
            inner += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            inner += ["--ro-bind", link, link]
    inner += ["--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"]
    argv = task_code_argv(TaskCodeSpec(tmp_bytes=16 << 20), inner)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                              preexec_fn=_prepare_child, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run bubblewrap for task code: {exc}"
    if done.returncode != 0:
        return ("a sandbox cannot be started inside the task-code sandbox here (the judge starts the candidate's "
                f"from inside its own): {(done.stderr or done.stdout).strip()[:300]}; task code is never run "
                "outside a sandbox; check that unprivileged user namespaces may nest (user.max_user_namespaces)")
    return ""


def python_argv(module: str, *args: str) -> list[str]:
    """``python -m module args`` with the host's interpreter (bound read-only inside)."""
    return [interpreter(), "-B", "-m", module, *args]


def interpreter() -> str:
    """This interpreter by a path that exists inside: its folder resolved (a virtual environment reached through a
    symlinked folder is bound at its real path), its name kept (so the environment's pyvenv.cfg still applies)."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))
