"""`CandidateProcess`: the judge's handle on the sandboxed candidate process of one evaluation.

The judge starts it (`start`), has it load the solution (`load`), shares memory with it (`share`), asks for calls
(`call`, which also measures the wall time of the round trip on the judge's own clock), freezes it between calls
(`freeze`/`thaw`: SIGSTOP, so nothing it runs can touch the shared outputs after it answered), and ends it
(`close`, killing its whole process group). Everything it answers is the candidate's word.
"""
from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent import kernel_abi
from cuda_agent.errors import SandboxError
from cuda_agent.evaluator.judge import jit
from cuda_agent.evaluator.runner import channel
from cuda_agent.evaluator.runner.shm import SharedRegion
from cuda_agent.sandbox.process import ConfinedSpec, exit_code_from, process_tree, spawn_confined

log = logging.getLogger(__name__)

RUNNER_PACKAGE = "ca_runner"
RUNNER_MOUNT = "/opt/cuda-agent"
_RUNNER_SOURCE = Path(__file__).resolve().parent.parent / "runner"
_CONTROL_FD = 3
_LOG_TAIL = 6000
REPLY_SPIN_S = 0.25  # seconds the judge polls for a GPU request's reply before it sleeps (see channel.wait_readable)


class CandidateGone(Exception):
    """The candidate process ended or stopped answering; ``stage`` is the result stage it maps to."""

    def __init__(self, stage: str, reason: str, log: str = "") -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason
        self.log = log


@functools.lru_cache(maxsize=1)
def runner_copy() -> str:
    """A private copy of the runner package (its parent folder): what the sandbox shows, read-only, at
    /opt/cuda-agent. A copy, so the sandbox sees these few files and nothing else of the project. The kernel ABI
    (`cuda_agent.kernel_abi`, which the compiler uses too) is shipped in it as ``ca_runner/kernel_abi.py``."""
    root = tempfile.mkdtemp(prefix="cuda-agent-runner-")
    target = Path(root) / RUNNER_PACKAGE
    target.mkdir()
    for source in _RUNNER_SOURCE.glob("*.py"):
        shutil.copy2(source, target / source.name)
    shutil.copy2(kernel_abi.__file__, target / "kernel_abi.py")
    os.chmod(root, 0o755)
    for path in [target, *target.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return root


@dataclass(frozen=True)
class Spare:
    """A candidate process started ahead of time (it has imported torch and loaded nothing of any candidate's): the
    warm worker keeps one, and the next evaluation adopts it instead of waiting seconds for a new one."""

    sock_fd: int
    status_fd: int
    pgid: int
    root: str
    gpu: bool
    visible: str
    broker_pgid: int | None = None


_spare: Spare | None = None


def make_spare(gpu: bool) -> Spare:
    """Start a spare candidate process in a fresh scratch folder. Raises SandboxError or OSError."""
    root = tempfile.mkdtemp(prefix="cuda-agent-eval-")
    os.chmod(root, 0o755)
    scratch = Path(root) / "scratch"
    scratch.mkdir()
    os.chmod(scratch, 0o777)
    proc = CandidateProcess(scratch=scratch, gpu=gpu, sandboxed=True, tap=gpu)
    proc.spawn()
    assert proc._sock is not None and proc._proc is not None
    fd = proc._sock.detach()
    assert proc._status_fd is not None
    return Spare(fd, proc._status_fd, proc._proc.pid, root, gpu, os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                 proc._broker_pgid)


def offer_spare(spare: Spare | None) -> None:
    """Make ``spare`` the one the next `take_spare` in this process returns (the forked judge's)."""
    global _spare
    _spare = spare


def take_spare(gpu: bool, visible: str) -> Spare | None:
    """The offered spare if it fits (same device visibility), else None (an unfitting one is ended)."""
    global _spare
    spare, _spare = _spare, None
    if spare is None:
        return None
    if spare.gpu == gpu and spare.visible == visible:
        return spare
    for pgid in (spare.pgid, spare.broker_pgid):
        try:
            if pgid is not None:
                os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os.close(spare.sock_fd)
    os.close(spare.status_fd)
    shutil.rmtree(spare.root, ignore_errors=True)
    return None


class CandidateProcess:
    """One candidate process. ``sandboxed=False`` runs it unconfined (the explicit opt-out for trusted code).
    ``compile_broker``: start the compile broker beside it (`judge.jit`; default: where Triton is installed)."""

    def __init__(self, *, scratch: Path, gpu: bool, sandboxed: bool = True, ro_dirs: dict[str, str] | None = None,
                 env: dict[str, str] | None = None, confine: bool = True, tap: bool = True,
                 compile_broker: bool | None = None) -> None:
        self.scratch = Path(scratch)
        self.gpu = gpu
        self.sandboxed = sandboxed
        self.ro_dirs = dict(ro_dirs or {})
        self.env = dict(env or {})
        self.confine = confine
        self.tap = tap
        self.log_path = self.scratch.parent / f"{self.scratch.name}.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._runner_pid: int | None = None
        self._frozen = False
        self._started = 0.0
        self.startup_s = 0.0
        self._pgid: int | None = None
        self._status_fd: int | None = None
        self.compile_broker = bool(jit.triton_tools()) if compile_broker is None else compile_broker
        self._broker_pgid: int | None = None
        self._broker_proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def adopt(cls, spare: Spare) -> "CandidateProcess":
        """Take over a spare process (its scratch folder is ``spare.root``/scratch)."""
        proc = cls(scratch=Path(spare.root) / "scratch", gpu=spare.gpu, sandboxed=True)
        proc._sock = socket.socket(fileno=spare.sock_fd)
        proc._status_fd = spare.status_fd
        proc._pgid = spare.pgid
        proc._broker_pgid = spare.broker_pgid
        proc._started = time.perf_counter()
        return proc

    # -- life ---------------------------------------------------------------------------------------------------
    def start(self, timeout: float) -> None:
        """`spawn` and `wait_ready`."""
        self.spawn()
        self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the process (it imports torch while the judge goes on). Raises SandboxError when no sandbox can
        be made here, or OSError."""
        self._started = time.perf_counter()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        command = [sys.executable, "-m", f"{RUNNER_PACKAGE}.boot", "--control-fd", str(theirs.fileno()),
                   "--device", "cuda:0" if self.gpu else "cpu"]
        if self.tap:
            command.append("--tap")
        if not self.confine:
            command.append("--no-confine")
        passed = [theirs.fileno()]
        tools = jit.triton_tools() if self.compile_broker else {}
        broker_end = candidate_end = None
        if tools:
            # Rationale: the candidate may not start ptxas itself (one process, frozen as a whole); the broker that
            # runs it for the candidate lives in a sandbox of its own, out of the candidate's reach (`runner.broker`).
            broker_end, candidate_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            command += ["--compile-fd", str(candidate_end.fileno())]
            for name, path in sorted(tools.items()):
                command += ["--jit-tool", f"{name}={path}"]
            passed.append(candidate_end.fileno())
            # CC: Triton looks for a C compiler before building its runtime helper; the jit hook answers "cc" with
            # the prebuilt helper (`runner.jit`), whether or not a compiler is installed.
            env_jit = {"TRITON_CACHE_DIR": "/scratch/.triton/cache", "TRITON_HOME": "/scratch/.triton", "CC": "cc"}
        else:
            env_jit = {}
        log_fh = open(self.log_path, "wb")
        try:
            if broker_end is not None:
                broker = jit.start_broker(broker_end.fileno(), tools, sandboxed=self.sandboxed,
                                          runner_root=runner_copy(), runner_mount=RUNNER_MOUNT)
                self._broker_pgid = broker.pid
                self._broker_proc = broker
            if self.sandboxed:
                ro = {f"{RUNNER_MOUNT}": runner_copy(), **self.ro_dirs}
                spec = ConfinedSpec(scratch=self.scratch, ro_dirs=ro, gpu=self.gpu, single_process=True,
                                    env={"PYTHONPATH": RUNNER_MOUNT, **env_jit, **self.env})
                status_r, status_w = os.pipe()
                try:
                    self._proc = spawn_confined(spec, command, pass_fds=tuple(passed), stdout=log_fh.fileno(),
                                                stderr=subprocess.STDOUT, status_fd=status_w)
                except BaseException:
                    os.close(status_r)
                    raise
                finally:
                    os.close(status_w)
                self._status_fd = status_r
            else:
                env = {**os.environ, "PYTHONPATH": runner_copy(), **self.env}
                if env_jit:
                    env.update({**env_jit, "TRITON_CACHE_DIR": str(self.scratch / ".triton" / "cache"),
                                "TRITON_HOME": str(self.scratch / ".triton")})
                self._proc = subprocess.Popen(command, pass_fds=tuple(passed), cwd=self.scratch, env=env,
                                              stdin=subprocess.DEVNULL, stdout=log_fh.fileno(),
                                              stderr=subprocess.STDOUT, start_new_session=True)
        except (OSError, SandboxError):
            ours.close()
            self._kill_broker()
            raise
        finally:
            theirs.close()
            for end in (broker_end, candidate_end):
                if end is not None:
                    end.close()
            log_fh.close()
        self._sock = ours
        self._pgid = self._proc.pid

    def wait_ready(self, timeout: float) -> None:
        """Wait for the process's first message. Raises CandidateGone."""
        self.request({}, timeout=timeout, send=False)
        self._runner_pid = self._find_runner()
        self.startup_s = time.perf_counter() - self._started

    def _find_runner(self) -> int | None:
        """The host pid of the Python process inside (bubblewrap's init sits between)."""
        assert self._pgid is not None
        if not self.sandboxed:
            return self._pgid
        for pid in process_tree(self._pgid)[1:]:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if fh.read().split(b"\0", 1)[0] == sys.executable.encode():
                        return pid
            except OSError:
                continue
        return None

    @property
    def pid(self) -> int | None:
        return self._runner_pid

    def close(self) -> None:
        """End the process and everything it started (its process group). Idempotent."""
        if self._frozen:
            self.thaw()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None
        if self._pgid is not None:
            try:
                os.killpg(self._pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self._wait_exit(10.0) is False:
                log.warning("candidate process %s did not end after SIGKILL", self._pgid)
        self._kill_broker()

    def _kill_broker(self) -> None:
        """End the compile broker's sandbox (it also ends by itself once the candidate's end of its socket closes)."""
        if self._broker_pgid is not None:
            try:
                os.killpg(self._broker_pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._broker_pgid = None
        if self._broker_proc is not None:
            try:
                self._broker_proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                log.warning("compile broker %s did not end after SIGKILL", self._broker_proc.pid)
            self._broker_proc = None

    @property
    def pgid(self) -> int | None:
        return self._pgid

    def _alive(self) -> bool:
        return self._wait_exit(0.05) is False

    def _wait_exit(self, timeout: float) -> int | bool | None:
        """The exit code (a child of ours), True (ended, not ours to reap), or False (still running)."""
        if self._proc is not None:
            try:
                return self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(self._pgid, 0)  # type: ignore[arg-type]
            except ProcessLookupError:
                return True
            try:
                with open(f"/proc/{self._pgid}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                        return True
            except OSError:
                return True
            time.sleep(0.01)
        return False

    def log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        return data[-_LOG_TAIL:].decode(errors="replace")

    # -- messages -----------------------------------------------------------------------------------------------
    def request(self, message: dict[str, Any], *, timeout: float, fds: tuple[int, ...] = (),
                send: bool = True, spin_s: float = 0.0) -> dict[str, Any]:
        """Send ``message`` and wait up to ``timeout`` seconds for the reply, polling without sleeping for the first
        ``spin_s`` seconds (`channel.wait_readable`). Raises CandidateGone (timeout, crash, a reply that is not a
        message)."""
        if self._sock is None:
            raise CandidateGone("eval_error", "the candidate process is not running")
        self.thaw()
        deadline = time.monotonic() + max(timeout, 0.001)
        try:
            if send:
                self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
                channel.send(self._sock, message, fds)
            if spin_s > 0:
                channel.wait_readable(self._sock, min(spin_s, max(deadline - time.monotonic(), 0.0)),
                                      time.perf_counter)
            self._sock.settimeout(max(deadline - time.monotonic(), 0.001))
            reply, extra = channel.receive(self._sock)
        except (socket.timeout, TimeoutError) as exc:
            raise CandidateGone("timeout", f"the candidate did not answer within {timeout:.1f} s (a hang or an "
                                           "endless kernel)", self.log_tail()) from exc
        except channel.WireClosed as exc:
            raise self._ended(exc) from exc
        except channel.WireError as exc:
            if self._alive():
                # Rationale: only the runner writes replies; anything else on the channel is the candidate's code
                # writing to its process's descriptors (a forged reply), and ends the evaluation.
                raise CandidateGone("crashed", f"the candidate's process wrote something that is not the "
                                               f"evaluator's reply ({exc}); its channel is not the candidate's to "
                                               "use", self.log_tail()) from exc
            raise self._ended(exc) from exc
        except OSError as exc:
            raise self._ended(exc) from exc
        for fd in extra:
            os.close(fd)
        return reply

    def _ended(self, exc: BaseException) -> CandidateGone:
        status = self._wait_exit(5.0)
        code = status if isinstance(status, int) and not isinstance(status, bool) else None
        if self._status_fd is not None:  # bubblewrap's own report (the only one there is for an adopted spare)
            reported = exit_code_from(self._status_fd, 2.0)
            code = reported if reported is not None else code
        if code is not None and code > 128 and self.sandboxed:
            code = -(code - 128)  # bubblewrap exits with 128 + the signal that ended the command
        text = self.log_tail()
        lower = text.lower()
        if "out of memory" in lower or code == -signal.SIGKILL:
            return CandidateGone("out_of_memory", "the candidate process ran out of memory or was killed", text)
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            reason = f"the candidate process crashed with signal {name}"
        else:
            reason = f"the candidate process exited (code {code}) without answering ({exc})"
        if "illegal memory access" in lower:
            reason += " (an illegal memory access: a kernel read or wrote out of bounds)"
        return CandidateGone("crashed", reason, text)

    def share(self, regions: dict[int, SharedRegion], timeout: float) -> dict[str, Any]:
        specs = [{"id": rid, "nbytes": region.nbytes} for rid, region in regions.items()]
        return self.request({"op": "regions", "regions": specs}, timeout=timeout,
                            fds=tuple(region.fd for region in regions.values()))

    def call(self, message: dict[str, Any], timeout: float) -> tuple[dict[str, Any], float]:
        """One call; returns the reply and the round trip's wall milliseconds on the judge's clock. The process is
        frozen as soon as the reply is in."""
        start = time.perf_counter()
        reply = self.request(message, timeout=timeout, spin_s=REPLY_SPIN_S if self.gpu else 0.0)
        wall_ms = (time.perf_counter() - start) * 1e3
        self.freeze()
        return reply, wall_ms

    # -- freezing -----------------------------------------------------------------------------------------------
    def freeze(self) -> None:
        """SIGSTOP the candidate's process: no thread of it runs until the next request."""
        if self._runner_pid is not None and not self._frozen:
            try:
                os.kill(self._runner_pid, signal.SIGSTOP)
                self._frozen = True
            except ProcessLookupError:
                pass

    def thaw(self) -> None:
        if self._runner_pid is not None and self._frozen:
            try:
                os.kill(self._runner_pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self._frozen = False

    def cpu_seconds(self) -> float | None:
        """User+system CPU seconds of the candidate's process so far, read from the host's /proc."""
        if self._runner_pid is None:
            return None
        try:
            with open(f"/proc/{self._runner_pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None
