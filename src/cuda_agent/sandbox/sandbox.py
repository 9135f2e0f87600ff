"""`Sandbox`: one episode's confined shell, with three verbs (``exec``, ``read_file``, ``write_file``).

Each ``exec`` is a fresh bubblewrap sandbox over the same workspace: no network, the workspace read-write at
/workspace with the protected files read-only on top, toolchains read-only, a private /tmp, everything else absent,
limits on CPU, memory, processes, file size, disk, output and wall time. Background processes end with the
command (its PID namespace goes away). Escape attempts fail and are recorded in ``ExecResult.violations``,
``Sandbox.violations`` and, if given, a JSONL log.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from cuda_agent.errors import SandboxError
from cuda_agent.sandbox import _detect
from cuda_agent.sandbox._exec import REPORT_MARK, monitor_argv, run_bwrap, write_monitor_shell
from cuda_agent.sandbox._layout import (BROKER_DIR, CLIENT_DIR, MONITOR_DIR, SANDBOX_UID, Layout, compiler_roots,
                                        cuda_roots, drop_privileges_prefix, inside_path_env, namespace_args,
                                        python_executable, python_roots)
from cuda_agent.sandbox._limits import ExecResult, SandboxLimits, Violation
from cuda_agent.sandbox._monitor import (CanaryWatch, UidLease, chown_tree, digest, disk_usage, no_route_packets,
                                         unsafe_entries)
from cuda_agent.sandbox._probe import bwrap_path, check_sandbox
from cuda_agent.sandbox._seccomp import no_userns_filter
from cuda_agent.sandbox.broker import SOCKET_NAME, Broker, Handler, install_client
from cuda_agent.sandbox.shell_base import WorkspaceShell

log = logging.getLogger(__name__)

DECOY_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/root/.ssh/id_rsa")
DECOY_DIRS = ("/root/.ssh", "/home")
ORDINARY_PATHS = ("/", "/tmp", "/var/tmp", "/dev/shm", "/var", "/etc", "/run", "/opt", "/workspace")
SIGXFSZ_EXIT = 128 + 25


def _overlaps(path: str, others: Sequence[str]) -> bool:
    """Whether ``path`` is one of ``others``, lies inside one, or contains one."""
    return any(path == o or path.startswith(o.rstrip("/") + "/") or o.startswith(path.rstrip("/") + "/")
               for o in others)


class Sandbox(WorkspaceShell):
    """A confined shell over one workspace.

    Args:
        workspace: the episode's workspace folder (host path).
        limits: resource limits (`SandboxLimits`).
        broker: a `Broker` (or a bare handler, for which one is made) that serves ``cuda-agent <command>``.
        protected: workspace-relative paths bound read-only (a trailing ``/`` for a folder): an agent's workspace
            passes `cuda_agent.workspace.PROTECTED_ROOTS`, the one list every guard uses. A parameter, with no
            default, so that the sandbox knows nothing of the workspace's layout and no caller protects nothing
            by forgetting it.
        identity: ``auto`` (``setuid`` on a root host, else ``userns``), ``userns`` or ``setuid``.
        extra_ro / extra_rw: more host folders, visible at the same path.
        sensitive_paths: host paths whose mention or opening is recorded as an escape attempt (default: the
            workspace's parent folder, where sibling episodes live, and the host's working folder).
        log_path: a JSONL file to which each violation is appended.

    Raises:
        SandboxError: bubblewrap is missing or cannot create namespaces here (the message says how to fix it),
            or the workspace is not a folder.
    """

    def __init__(self, workspace: str | Path, *, limits: SandboxLimits | None = None,
                 protected: Sequence[str], broker: Broker | Handler | None = None,
                 identity: str = "auto", extra_ro: Sequence[str | Path] = (), extra_rw: Sequence[str | Path] = (),
                 sensitive_paths: Sequence[str | Path] | None = None, log_path: str | Path | None = None,
                 workspace_mount: str = "/workspace") -> None:
        self.identity = check_sandbox(identity)
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise SandboxError(f"sandbox workspace {self.workspace} is not a folder; create the workspace first")
        self.limits = limits or SandboxLimits()
        self.workspace_mount = workspace_mount
        self.protected = tuple(protected)
        self.log_path = Path(log_path) if log_path is not None else None
        self._violations: list[Violation] = []
        self._closed = False
        self._state = Path(tempfile.mkdtemp(prefix="cuda-agent-sandbox-"))
        self._own_broker: Broker | None = None
        self._lease: UidLease | None = None
        self._canaries = CanaryWatch()
        try:
            self._setup(broker, extra_ro, extra_rw, sensitive_paths)
        except BaseException:
            self.close()
            raise

    # -- setup ---------------------------------------------------------------------------------------------------

    def _setup(self, broker: Broker | Handler | None, extra_ro: Sequence[str | Path],
               extra_rw: Sequence[str | Path], sensitive: Sequence[str | Path] | None) -> None:
        self._baseline = {rel: digest(self.workspace / rel.rstrip("/")) for rel in self.protected}
        self._backup = self._state / "protected"
        for rel in self.protected:
            src = self.workspace / rel.rstrip("/")
            if src.exists():
                dst = self._backup / rel.rstrip("/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                if src.is_dir():
                    shutil.copytree(src, dst, symlinks=True)
                else:
                    shutil.copy2(src, dst, follow_symlinks=False)
        if self.identity == "setuid":
            self._lease = UidLease()
            self.uid = self._lease.uid
            chown_tree(self.workspace, self.uid, {self.workspace / p.rstrip("/") for p in self.protected})
        else:
            self.uid = SANDBOX_UID
        files = self._write_etc()
        ro_dirs = {CLIENT_DIR: str(install_client(self._state / "bin", python_executable())),
                   MONITOR_DIR: str(write_monitor_shell(self._state))}
        if broker is not None:
            if not isinstance(broker, Broker):
                broker = self._own_broker = Broker(broker)
            ro_dirs[BROKER_DIR] = str(broker.endpoint(self.workspace))
        ro = [str(Path(p).resolve()) for p in extra_ro]
        rw = [str(Path(p).resolve()) for p in extra_rw]
        if sensitive is None:
            sensitive = [self.workspace.parent, Path.cwd()]
        bound = [self.workspace_mount, "/usr", "/proc", "/dev", "/tmp", "/run", "/opt", *python_roots(),
                 *cuda_roots(), *ro, *rw]
        self.sensitive = tuple(p for p in dict.fromkeys(str(Path(x).resolve()) for x in sensitive)
                               if p not in ORDINARY_PATHS and not _overlaps(p, bound))
        files.update(self._decoys(bound))
        env = {"PATH": inside_path_env(), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb",
               "USER": "agent", "PYTHONDONTWRITEBYTECODE": "1", "CUDA_AGENT_WORKSPACE": self.workspace_mount,
               "CUDA_AGENT_BROKER": f"{BROKER_DIR}/{SOCKET_NAME}"}
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                env[var] = os.environ[var]
        self._layout = Layout(self.workspace, self.workspace_mount, protected=tuple(p.rstrip("/") for p in
                              self.protected), ro=tuple(ro), rw=tuple(rw), files=files, ro_dirs=ro_dirs,
                              tmp_bytes=self.limits.tmp_bytes, env=env, chdir="/")
        self._usage = disk_usage(self.workspace)
        self._seccomp_path: Path | None = None
        program = no_userns_filter() if self.identity == "setuid" else None
        if program is not None:
            self._seccomp_path = self._state / "no-userns.bpf"
            self._seccomp_path.write_bytes(program)
        elif self.identity == "setuid":
            log.warning("no seccomp filter for this machine: the sandbox's user may create user namespaces")

    def _write_etc(self) -> dict[str, str]:
        etc = self._state / "etc"
        etc.mkdir()
        uid = SANDBOX_UID if self.identity == "userns" else self.uid
        texts = {
            "passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:{uid}:{uid}:agent:/tmp:/bin/bash\n",
            "group": f"root:x:0:\nagent:x:{uid}:\n",
            "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
            "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
        }
        for name, text in texts.items():
            (etc / name).write_text(text)
            os.chmod(etc / name, 0o644)
        return {f"/etc/{name}": str(etc / name) for name in texts}

    def _decoys(self, bound: list[str]) -> dict[str, str]:
        """Canary files at sensitive paths, watched with inotify: opening one is a read attempt, whatever trick
        was used to spell its path."""
        def clashes(path: str) -> bool:
            return _overlaps(path, [b for b in bound if b != "/tmp"])

        decoy_root = self._state / "decoys"
        decoy_root.mkdir()
        os.chmod(decoy_root, 0o755)
        mounts: dict[str, str] = {}
        token = os.urandom(8).hex()
        for n, inside in enumerate(DECOY_FILES):
            if clashes(inside):
                continue
            host = decoy_root / f"f{n}"
            host.write_text(f"canary-{token}: this file is a decoy; the real one is not visible in the sandbox\n")
            os.chmod(host, 0o644)
            mounts[inside] = str(host)
            self._canaries.watch(host, inside)
        dirs = [*DECOY_DIRS, *self.sensitive]
        for n, inside in enumerate(dict.fromkeys(dirs)):
            if inside in ("/", "/tmp") or clashes(inside) or any(m.startswith(inside + "/") for m in mounts):
                continue
            host = decoy_root / f"d{n}"
            host.mkdir()
            os.chmod(host, 0o755)
            mounts[inside] = str(host)
            self._canaries.watch(host, inside)
        self._canaries.opened()
        return mounts

    # -- the three verbs ---------------------------------------------------------------------------------------

    def exec(self, command: str | Sequence[str], timeout: float | None = None, *, cwd: str | None = None,
             input: str | bytes | None = None) -> ExecResult:
        """Run ``command`` (a bash command line, or an argv list) in a fresh sandbox over the workspace.

        Args:
            timeout: wall-time limit in seconds (default ``limits.timeout_s``); on expiry the whole process tree is
                killed and the result has ``timed_out=True`` and returncode 124.
            cwd: working folder, relative to /workspace (default /workspace).
            input: bytes or text for stdin (default: none).

        Returns an `ExecResult`; a failing command is a result, not an error. A command killed for a limit other
        than time has returncode 137 and a note in stderr.

        Raises:
            SandboxError: the sandbox is closed, or bubblewrap could not be started.
        """
        if self._closed:
            raise SandboxError("this sandbox is closed; create a new Sandbox for the workspace")
        text = command if isinstance(command, str) else shlex.join(command)
        inside_cwd = self.workspace_mount if not cwd else (
            cwd if cwd.startswith("/") else f"{self.workspace_mount}/{cwd}")
        limit = float(timeout if timeout is not None else self.limits.timeout_s)
        report_r, report_w = os.pipe()
        os.set_inheritable(report_w, True)
        pass_fds: list[int] = []
        argv = [bwrap_path(), *namespace_args(self.identity), *self._seccomp_args(pass_fds), *self._layout.args(),
                "--"]
        if self.identity == "setuid":
            argv += drop_privileges_prefix(self.uid)
        argv += monitor_argv(self.limits, report_w, text, inside_cwd)
        start_usage = self._usage
        quota = self.limits.disk_quota_bytes
        if self.identity == "setuid":
            self._give_agent_files()

        def over_quota() -> str:
            if quota is None:
                return ""
            usage = disk_usage(self.workspace)
            return "disk_quota" if usage > quota and usage > start_usage else ""

        stdin = input.encode() if isinstance(input, str) else input
        try:
            raw = run_bwrap(argv, report_w=report_w, report_r=report_r, limits=self.limits, timeout=limit,
                            stdin_data=stdin, check=over_quota, extra_fds=tuple(pass_fds))
        except OSError as exc:
            raise SandboxError(f"cannot start bubblewrap for {self.workspace}: {exc}") from exc
        finally:
            for fd in pass_fds:
                os.close(fd)
        return self._finish(text, raw, start_usage)

    def _give_agent_files(self) -> None:
        """Files the host made since the last command (an edit tool, a build) become the sandbox user's, so the
        agent can change them from bash too. Protected paths stay the host's."""
        skip = {self.workspace / p.rstrip("/") for p in self.protected}
        for dirpath, dirnames, filenames in os.walk(self.workspace):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if here / d not in skip]
            for name in [*dirnames, *filenames]:
                path = here / name
                if path in skip:
                    continue
                try:
                    if os.lstat(path).st_uid != self.uid:
                        os.chown(path, self.uid, self.uid, follow_symlinks=False)
                except OSError:
                    continue

    def _seccomp_args(self, pass_fds: list[int]) -> list[str]:
        if self._seccomp_path is None:
            return []
        fd = os.open(self._seccomp_path, os.O_RDONLY | os.O_CLOEXEC)
        pass_fds.append(fd)
        return ["--seccomp", str(fd)]

    def _finish(self, command: str, raw, start_usage: int) -> ExecResult:
        stdout, stderr = raw.stdout.text(), raw.stderr.text()
        violations: list[Violation] = []
        notes: list[str] = []
        for inside in self._canaries.opened():
            violations.append(Violation("read_outside", f"opened {inside} (a decoy: the real file is not "
                                        "visible)", "effect"))
        packets = no_route_packets(raw.report)
        if packets:
            violations.append(Violation("network", f"{packets} packet(s) or connection(s) aimed outside the "
                                        "sandbox (no network)", "effect"))
        if REPORT_MARK not in raw.report and not raw.killed_reason:
            violations.append(Violation("monitor", "the sandbox's monitoring shell was killed before it reported",
                                        "effect"))
        violations += self._check_protected()
        violations += self._remove_unsafe()
        usage = disk_usage(self.workspace)
        quota = self.limits.disk_quota_bytes
        if raw.killed_reason == "disk_quota" or (quota is not None and usage > quota and usage > start_usage):
            violations.append(Violation("disk_quota", f"workspace grew to {usage} bytes, over its {quota}-byte "
                                        "quota", "effect"))
            notes.append(f"workspace is over its disk quota ({usage} of {quota} bytes): delete files")
        self._usage = usage
        if raw.returncode == SIGXFSZ_EXIT or "File size limit exceeded" in stderr:
            violations.append(Violation("file_size", f"a file reached the {self.limits.max_file_bytes}-byte "
                                        "limit", "effect"))
        nproc = self.limits.max_processes
        if nproc is not None and raw.peak_processes >= max(2, int(nproc * 0.9)):
            violations.append(Violation("fork_bomb", f"{raw.peak_processes} processes (limit {nproc})", "effect"))
        if raw.killed_reason == "timeout":
            notes.append(f"killed after the {raw.seconds:.1f} s wall-time limit (all its processes)")
        elif raw.killed_reason == "output":
            notes.append(f"killed: printed more than {self.limits.output_kill_bytes} bytes")
        elif raw.killed_reason == "disk_quota":
            notes.append("killed: the workspace grew past its disk quota")
        seen = {v.kind for v in violations}
        for v in _detect.scan(command, stdout + "\n" + stderr, workspace_mount=self.workspace_mount,
                              protected=self.protected, sensitive=self._sensitive_for(command),
                              writable=self._layout.rw):
            if v.kind not in seen or v.evidence != "blocked":
                violations.append(v)
        if notes:
            stderr += "".join(f"\n[sandbox: {n}]" for n in notes) + "\n"
        self._record(violations, command)
        return ExecResult(raw.returncode, stdout, stderr, timed_out=raw.killed_reason == "timeout",
                          seconds=raw.seconds, truncated_bytes=raw.stdout.dropped + raw.stderr.dropped,
                          violations=tuple(violations), killed_reason=raw.killed_reason,
                          peak_processes=raw.peak_processes)

    def _sensitive_for(self, command: str) -> tuple[str, ...]:
        own = str(self.workspace)
        return tuple(s for s in self.sensitive if not own.startswith(s) or s not in command.replace(own, ""))

    def _remove_unsafe(self) -> list[Violation]:
        """Remove symlinks that point out of the workspace (a host-side reader, such as the build or the
        evaluator, would follow them to the host's real files) and FIFOs/sockets (it would block on them).
        Relative links inside the workspace and links into the toolchain stay."""
        allowed = ("/usr", "/dev/null", *python_roots(), *cuda_roots(), *compiler_roots())
        skip = tuple(self.workspace / p.rstrip("/") for p in self.protected)
        found: list[Violation] = []
        for path, what in unsafe_entries(self.workspace, allowed, skip):
            rel = path.relative_to(self.workspace).as_posix()
            try:
                path.unlink()
            except OSError as exc:
                log.warning("cannot remove unsafe workspace entry %s: %s", path, exc)
            found.append(Violation("unsafe_file", f"{rel}: {what}; removed", "effect"))
        return found

    def _check_protected(self) -> list[Violation]:
        """Protected files are read-only inside, so a change means the protection failed: record it and restore
        the file from the copy taken at start."""
        found: list[Violation] = []
        for rel, expected in self._baseline.items():
            path = self.workspace / rel.rstrip("/")
            if digest(path) == expected:
                continue
            found.append(Violation("protected_file", f"{rel} was changed; restored", "effect"))
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            backup = self._backup / rel.rstrip("/")
            if backup.is_dir():
                shutil.copytree(backup, path, symlinks=True)
            elif backup.exists():
                shutil.copy2(backup, path)
        return found

    def _owned(self, paths: Sequence[Path]) -> None:
        """Files a file verb made become the sandbox user's (setuid identity), so the agent can change them from
        bash too."""
        if self.identity == "setuid":
            for path in paths:
                os.chown(path, self.uid, self.uid, follow_symlinks=False)

    # -- records and lifetime ----------------------------------------------------------------------------------

    @property
    def violations(self) -> tuple[Violation, ...]:
        """Every violation recorded in this sandbox's life, oldest first."""
        return tuple(self._violations)

    def _record(self, violations: list[Violation], command: str) -> None:
        for v in violations:
            self._violations.append(v)
            log.warning("sandbox %s: %s (%s): %s", self.workspace, v.kind, v.evidence, v.detail)
        if violations and self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a") as fh:
                for v in violations:
                    fh.write(json.dumps({**v.to_dict(), "command": command[:2000]}) + "\n")

    def close(self) -> None:
        """Free the sandbox (its uid, canaries, own broker, temporary files). Idempotent; the workspace stays."""
        if self._closed:
            return
        self._closed = True
        self._canaries.close()
        if self._own_broker is not None:
            self._own_broker.close()
        if self._lease is not None:
            self._lease.release()
        shutil.rmtree(self._state, ignore_errors=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
