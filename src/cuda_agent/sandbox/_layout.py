"""What the sandbox sees: the read-only toolchain (system, CUDA, Python) and the bubblewrap arguments that build it.

Everything not named here is absent inside: other workspaces, the host's /tmp, /root, /home, the checkout.
"""
from __future__ import annotations

import functools
import os
import shutil
import site
import sys
from dataclasses import dataclass, field
from pathlib import Path

TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CLIENT_DIR = "/opt/cuda-agent/bin"
MONITOR_DIR = "/opt/cuda-agent/monitor"
BROKER_DIR = "/run/cuda-agent"
SANDBOX_UID = 65534


def _contained(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _minimal_roots(paths: list[str]) -> list[str]:
    """Drop paths that lie inside another path of the list (binding the outer one shows them already)."""
    out: list[str] = []
    for p in sorted(set(paths), key=len):
        if not _contained(p, out):
            out.append(p)
    return out


@functools.lru_cache(maxsize=1)
def python_roots() -> tuple[str, ...]:
    """The Python prefixes and site-packages folders `python` needs inside (not sys.path entries such as the
    checkout: those would expose the evaluator's working copy)."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    candidates.update(site.getsitepackages())
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site:
        candidates.add(user_site)
    exe = os.path.realpath(sys.executable)
    candidates.add(str(Path(exe).parent.parent))
    real = [os.path.realpath(c) for c in candidates if c and os.path.isdir(c)]
    return tuple(r for r in _minimal_roots(real) if not _contained(r, ["/usr"]))


@functools.lru_cache(maxsize=1)
def cuda_roots() -> tuple[str, ...]:
    """The CUDA toolkit folders (CUDA_HOME, CUDA_PATH, the nvcc on PATH) that lie outside /usr."""
    found: list[str] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        value = os.environ.get(var)
        if value and os.path.isdir(value):
            found.append(os.path.realpath(value))
    nvcc = shutil.which("nvcc")
    if nvcc:
        found.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    return tuple(r for r in _minimal_roots(found) if not _contained(r, ["/usr"]))


@functools.lru_cache(maxsize=1)
def compiler_roots() -> tuple[str, ...]:
    """The install prefixes of the host C/C++ compilers (CC, CXX, and c++/g++/gcc/cc on PATH) that lie outside
    /usr: a build resolves its compiler outside the sandbox (a GPU host's CXX=/opt/gcc/bin/g++, say) and runs it
    inside, so the whole prefix (its cc1plus, headers and libraries) must be there too."""
    found: list[str] = []
    names = [os.environ.get("CC"), os.environ.get("CXX"), "c++", "g++", "gcc", "cc"]
    for name in names:
        path = shutil.which(name) if name else None
        if path:
            found.append(str(Path(os.path.realpath(path)).parent.parent))
    return tuple(r for r in _minimal_roots(found) if not _contained(r, ["/usr"]) and r != "/")


def python_executable() -> str:
    """The interpreter path to use inside (it lies under a bound prefix)."""
    return os.path.realpath(sys.executable)


def inside_path_env() -> str:
    """PATH inside: the cuda-agent client, this Python, the CUDA toolkit, then the system folders."""
    parts = [CLIENT_DIR, str(Path(sys.executable).parent), str(Path(python_executable()).parent)]
    parts += [f"{root}/bin" for root in (*cuda_roots(), *compiler_roots())]
    if os.path.isdir("/usr/local/cuda/bin"):
        parts.append("/usr/local/cuda/bin")
    return ":".join(dict.fromkeys(parts)) + ":" + SYSTEM_PATH


@dataclass
class Layout:
    """The mount plan of one sandbox, turned into bubblewrap arguments by `args`.

    ``workspace`` is bound read-write at ``workspace_mount``; each of ``protected`` (paths relative to the
    workspace) is bound read-only on top; ``rw``/``ro`` are extra host folders bound at the same path. ``chdir``
    (default: the workspace) is where bubblewrap starts the command, with the privileges it has then.
    """

    workspace: Path
    workspace_mount: str
    protected: tuple[str, ...] = ()
    writable_inside_protected: tuple[str, ...] = ()
    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    ro_dirs: dict[str, str] = field(default_factory=dict)
    tmp_bytes: int = 1 << 30
    env: dict[str, str] = field(default_factory=dict)
    chdir: str | None = None
    workspace_readonly: bool = False
    extra_args: tuple[str, ...] = ()  # more bubblewrap mount arguments, applied before the root is made read-only

    def toolchain_args(self) -> list[str]:
        args: list[str] = ["--ro-bind", "/usr", "/usr"]
        for link in TOP_LEVEL_LINKS:
            if os.path.islink(link):
                args += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                args += ["--ro-bind", link, link]
        for path in ETC_FILES:
            if os.path.exists(path):
                args += ["--ro-bind", path, path]
        for root in (*python_roots(), *cuda_roots(), *compiler_roots()):
            args += ["--ro-bind", root, root]
        return args

    def args(self) -> list[str]:
        # Rationale: the sandbox's own /tmp is mounted before anything is bound, so that what lives under the
        # host's /tmp (a checkout's virtual environment, a workspace) is bound on top of it rather than hidden by it.
        outside_tmp, inside_tmp = self._parent_dirs()
        args = outside_tmp + ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(self.tmp_bytes),
                              "--tmpfs", "/tmp", "--perms", "1777", "--size", str(min(self.tmp_bytes, 256 << 20)),
                              "--tmpfs", "/dev/shm"]
        args += inside_tmp + self.toolchain_args()
        for inside, host in self.files.items():
            args += ["--ro-bind", host, inside]
        for inside, host in self.ro_dirs.items():
            args += ["--ro-bind", host, inside]
        ws = str(self.workspace)
        args += ["--ro-bind" if self.workspace_readonly else "--bind", ws, self.workspace_mount]
        for rel in self.protected:
            if os.path.lexists(os.path.join(ws, rel)):
                args += ["--ro-bind", os.path.join(ws, rel), f"{self.workspace_mount}/{rel}"]
        for rel in self.writable_inside_protected:
            if os.path.isdir(os.path.join(ws, rel)):
                args += ["--bind", os.path.join(ws, rel), f"{self.workspace_mount}/{rel}"]
        for path in self.ro:
            args += ["--ro-bind", path, path]
        for path in self.rw:
            args += ["--bind", path, path]
        args += [*self.extra_args, "--remount-ro", "/", "--chdir", self.chdir or self.workspace_mount, "--clearenv"]
        for key, value in self.env.items():
            args += ["--setenv", key, value]
        return args


    def _parent_dirs(self) -> tuple[list[str], list[str]]:
        """``--dir`` (mode 0755) for every folder bubblewrap would otherwise create on its own as a mount point's
        parent: privileged bubblewrap makes those 0700, which would hide the toolchain from the sandbox's user.
        Two lists: the folders outside /tmp, and those inside it (made once the sandbox's /tmp is mounted)."""
        dests = [*python_roots(), *cuda_roots(), *compiler_roots(), *self.files, *self.ro_dirs, self.workspace_mount,
                 *self.ro, *self.rw, *(p for p in ETC_FILES if os.path.exists(p))]
        skip = ["/usr", "/proc", "/dev", *TOP_LEVEL_LINKS]
        parents: set[str] = set()
        for dest in dests:
            for parent in Path(dest).parents:
                text = str(parent)
                if text not in ("/", "/tmp") and not _contained(text, skip):
                    parents.add(text)
        outside: list[str] = []
        inside: list[str] = []
        for text in sorted(parents, key=lambda p: (p.count("/"), p)):
            (inside if text.startswith("/tmp/") else outside).extend(["--perms", "0755", "--dir", text])
        return outside, inside


def namespace_args(identity: str) -> list[str]:
    """Namespaces and privileges. ``userns``: bwrap makes a user namespace and runs the command as uid 65534 in it
    (any host user can do this). ``setuid`` (host root only): bwrap keeps just the right to change user, and
    setpriv then drops to a dedicated host uid with no capabilities, so RLIMIT_NPROC is enforced (the kernel
    does not enforce it for processes whose host uid is 0, which is what ``userns`` gives a root host)."""
    common = ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if identity == "userns":
        return ["--unshare-all", "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid",
                str(SANDBOX_UID), *common]
    return ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP",
            *common]


def drop_privileges_prefix(uid: int) -> list[str]:
    """The command prefix that, inside a ``setuid`` sandbox, becomes ``uid`` with no capabilities at all."""
    return [_setpriv(), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


@functools.lru_cache(maxsize=1)
def _setpriv() -> str:
    for candidate in ("/usr/bin/setpriv", "/bin/setpriv"):
        if os.path.exists(candidate):
            return candidate
    return "setpriv"
