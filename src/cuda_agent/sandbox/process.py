"""`spawn_confined`: a long-lived process in a sandbox of its own, for code that must run but may not be trusted.

The candidate's process (and the single-file build before it) runs here: the toolchain, Python and CUDA libraries
read-only; the GPU's device nodes (when asked); one private writable scratch folder; a private /tmp; no network; an
environment with nothing of the host's but what CUDA and Python need; no view of the store, the caches, other
workspaces, the project's source or anyone's home. A file outside the toolchain and the scratch folder (an
``#include "/etc/shadow"``, the parent's environment, the baseline cache) simply does not exist inside.
"""
from __future__ import annotations

import glob
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox._layout import Layout, cuda_roots, inside_path_env, namespace_args, python_roots
from cuda_agent.sandbox._probe import bwrap_path, check_sandbox

SCRATCH = "/scratch"
# Passed through when set on the host: what CUDA, PyTorch and the loader need to find the driver and the GPU.
PASSED_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
              "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUDA_MODULE_LOADING", "NCCL_NVLS_ENABLE",
              "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
_GPU_DEVICE_GLOBS = ("/dev/nvidia[0-9]*", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                     "/dev/nvidia-modeset", "/dev/nvidia-caps/*")
_DRIVER_DIRS = ("/usr/local/nvidia", "/usr/lib/wsl")


def gpu_device_nodes() -> list[str]:
    """The NVIDIA device nodes present on this host."""
    found: list[str] = []
    for pattern in _GPU_DEVICE_GLOBS:
        found += sorted(glob.glob(pattern))
    return found


def masked_package_dirs() -> list[str]:
    """Folders of cuda_agent's own code inside the bound Python roots (a regular install puts it in site-packages):
    hidden inside, so the candidate sees none of the project's source."""
    import cuda_agent

    here = str(Path(cuda_agent.__file__).resolve().parent)
    return [here] if any(here.startswith(root.rstrip("/") + "/") for root in python_roots()) else []


@dataclass
class ConfinedSpec:
    """What one confined process sees.

    Attributes:
        scratch: host folder bound read-write at /scratch (its working folder).
        ro_dirs: inside path -> host folder, bound read-only (the runner's code, prebuilt extensions).
        gpu: bind the GPU device nodes, /sys and the driver's folders.
        env: extra environment variables (on top of PATH/HOME/TMPDIR/LANG and `PASSED_ENV`).
        tmp_bytes: size of the private /tmp.
        single_process: run the command as pid 1 of its namespace, with no bubblewrap init beside it (for a command
            that starts no processes: the candidate's runner). Rationale: bubblewrap's init shares the command's
            uid and is not under the runner's seccomp filter, so the command could write its memory
            (/proc/1/mem) and have it start processes the judge never freezes.
        scratch_readonly: bind the scratch folder read-only (a process that needs no writable host folder: the
            compile broker).
    """

    scratch: Path
    ro_dirs: dict[str, str] = field(default_factory=dict)
    gpu: bool = False
    env: dict[str, str] = field(default_factory=dict)
    tmp_bytes: int = 4 << 30
    single_process: bool = False
    scratch_readonly: bool = False


def confined_argv(spec: ConfinedSpec, command: Sequence[str], status_fd: int | None = None) -> list[str]:
    """The bubblewrap command line that runs ``command`` as `spec` says (``status_fd``: bubblewrap writes JSON lines
    there, the command's exit code last). Raises SandboxError when bubblewrap cannot make namespaces here."""
    check_sandbox("userns")
    # USER/LOGNAME: the sandbox's uid has no passwd entry, and getpass.getuser() (torch's cache folders) reads these.
    env = {"PATH": inside_path_env(), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "USER": "candidate",
           "LOGNAME": "candidate", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor", "TRITON_CACHE_DIR": "/tmp/triton"}
    env.update({k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)})
    env.update(spec.env)
    extra: list[str] = []
    for folder in masked_package_dirs():
        extra += ["--tmpfs", folder, "--remount-ro", folder]
    if spec.single_process:
        extra += ["--as-pid-1"]
    if spec.gpu:
        for node in gpu_device_nodes():
            extra += ["--dev-bind", node, node]
        extra += ["--ro-bind", "/sys", "/sys"]
        for folder in _DRIVER_DIRS:
            if os.path.isdir(folder) and not any(folder.startswith(r) for r in (*python_roots(), *cuda_roots())):
                extra += ["--ro-bind", folder, folder]
    layout = Layout(Path(spec.scratch).resolve(), SCRATCH, ro_dirs=dict(spec.ro_dirs), tmp_bytes=spec.tmp_bytes,
                    env=env, chdir=SCRATCH, extra_args=tuple(extra),
                    workspace_readonly=spec.scratch_readonly)
    status = ["--json-status-fd", str(status_fd)] if status_fd is not None else []
    return [bwrap_path(), *namespace_args("userns"), *status, *layout.args(), "--", *command]


def _default_child_signals() -> None:
    """In the child, before bubblewrap starts: SIGCHLD back to its default. A parent that ignores SIGCHLD (the warm
    worker, which lets the kernel reap its judges) would pass that on, and bubblewrap, never seeing its child exit,
    would wait for ever."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def spawn_confined(spec: ConfinedSpec, command: Sequence[str], *, pass_fds: Sequence[int] = (),
                   stdout: int | None = None, stderr: int | None = None,
                   status_fd: int | None = None) -> "subprocess.Popen[bytes]":
    """Start ``command`` confined as `spec` says, in a new session (kill its process group to end it).
    ``status_fd``: an inheritable descriptor bubblewrap reports the command's exit code on (see `exit_code_from`),
    readable by whoever holds the other end, child of ours or not.

    Raises:
        SandboxError: bubblewrap is missing or cannot make namespaces here (the message says how to fix it), or
            it could not be started.
    """
    argv = confined_argv(spec, command, status_fd)
    fds = tuple(pass_fds) + ((status_fd,) if status_fd is not None else ())
    try:
        # Rationale: bubblewrap itself gets no environment. Whatever it runs with, a process of the sandbox can read
        # (/proc/<its pid>/environ: the same uid); the command's own environment is set by --setenv alone.
        return subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=stdout,
                                stderr=stderr, start_new_session=True, preexec_fn=_default_child_signals, env={})
    except OSError as exc:
        raise SandboxError(f"cannot start bubblewrap: {exc}") from exc


def exit_code_from(status_fd: int, timeout: float) -> int | None:
    """The confined command's exit code as bubblewrap reported it on its status descriptor (128 + N for signal N),
    or None when none arrived within ``timeout`` seconds."""
    import json
    import select

    deadline = time.monotonic() + timeout
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([status_fd], [], [], left)[0]:
            return None
        try:
            chunk = os.read(status_fd, 4096)
        except OSError:
            return None
        if not chunk:
            break
        data += chunk
        if b'"exit-code"' in data and data.endswith(b"\n"):
            break
    for line in reversed(data.decode(errors="replace").splitlines()):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "exit-code" in record:
            return int(record["exit-code"])
    return None


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (host pids), from /proc's children lists."""
    out: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in glob.glob(f"/proc/{current}/task/*/children"):
            try:
                with open(task) as fh:
                    todo.extend(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                continue
    return out


def run_confined(spec: ConfinedSpec, command: Sequence[str], timeout: float) -> "subprocess.CompletedProcess[str]":
    """Run ``command`` confined to completion (output captured); past ``timeout`` its whole tree is killed and
    `subprocess.TimeoutExpired` raised."""
    import signal

    proc = spawn_confined(spec, command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(command), proc.returncode, out.decode(errors="replace"), "")


def require_sandbox(allow_unsandboxed: bool) -> bool:
    """True when confined processes can be made here. Otherwise: raise SandboxError, unless the caller passed the
    explicit opt-out for trusted code (then False, and the caller runs the code unconfined)."""
    try:
        check_sandbox("userns")
        return True
    except SandboxError as exc:
        if allow_unsandboxed:
            return False
        raise SandboxError(f"{exc}. Untrusted code is never run outside the sandbox; for code you trust, pass "
                           "--unsafe-trusted-code-no-sandbox (EvalConfig.unsandboxed_trusted_code=True)") from exc
