"""Run one bubblewrap command: bounded output capture, the in-sandbox wrapper that sets limits and reports the
network counters, and the watch loop that kills the whole process tree on a limit."""
from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from cuda_agent.sandbox._layout import MONITOR_DIR
from cuda_agent.sandbox._limits import SandboxLimits
from cuda_agent import procs
from cuda_agent.procs import descendants

REPORT_MARK = "CUDA_AGENT_REPORT"
TIMEOUT_EXIT = 124
KILLED_EXIT = 137
MONITOR_SHELL = f"{MONITOR_DIR}/bash"
EXECUTE_ONLY = 0o111


def write_monitor_shell(state: Path) -> Path:
    """Copy bash into ``state/monitor/`` as an execute-only file and return that folder (bound read-only at
    `MONITOR_DIR`); the wrapper runs as `MONITOR_SHELL`.

    Why: the monitoring shell runs as the same user as the command, so the command could ptrace it (or write its
    memory through /proc/PID/mem) and forge the report. The kernel marks a process that executes a binary its
    user cannot read as not dumpable, and ptrace_may_access refuses to attach to (or open the memory of) a
    non-dumpable process without CAP_SYS_PTRACE, which nothing in the sandbox has. The read-only bind keeps the
    command from making the copy readable again. Commands the shell starts execute ordinary binaries, so they
    stay dumpable (debuggers work on the agent's own processes).

    The shell is started through itself once (`monitor_argv`): in a ``userns`` sandbox bubblewrap still holds
    capabilities inside its user namespace when it executes the first program, which lets that first exec read
    the file; the second exec, by a process with no capabilities left, is the one that marks it.

    Raises `OSError` if bash cannot be found or copied."""
    source = shutil.which("bash", path="/usr/bin:/bin") or "/bin/bash"
    folder = state / "monitor"
    folder.mkdir(mode=0o755, exist_ok=True)
    os.chmod(folder, 0o755)
    target = folder / "bash"
    shutil.copyfile(source, target)
    os.chmod(target, EXECUTE_ONLY)
    return folder


def monitor_argv(limits: SandboxLimits, report_fd: int, command: str, cwd: str) -> list[str]:
    """The argv that runs ``command`` in ``cwd`` under the monitoring shell (see `write_monitor_shell`)."""
    return [MONITOR_SHELL, "-c", 'exec "$@"', "monitor", MONITOR_SHELL, "-c", wrapper_script(limits, report_fd),
            "sandbox", command, cwd]


def wrapper_script(limits: SandboxLimits, report_fd: int) -> str:
    """bash run inside as ``bash -c WRAPPER name COMMAND CWD``: set the limits (soft and hard, so the command
    cannot raise them; where the host's hard limit is already lower, that stricter limit stays), run COMMAND in a subshell that does not hold the report pipe (a fork, not a new bash:
    ``exit`` or ``exec`` in COMMAND end only the subshell), then write the network namespace's counters and the
    process count to the report pipe using builtins only (no extra process)."""
    ulimits = ["ulimit -c 0"]
    if limits.cpu_seconds is not None:
        ulimits.append(f"ulimit -t {int(limits.cpu_seconds)}")
    if limits.memory_bytes is not None:
        ulimits.append(f"ulimit -v {int(limits.memory_bytes) // 1024}")
    if limits.max_file_bytes is not None:
        ulimits.append(f"ulimit -f {max(1, int(limits.max_file_bytes) // 1024)}")
    if limits.max_processes is not None:
        ulimits.append(f"ulimit -u {int(limits.max_processes)}")
    return (
        "; ".join(f"{u} 2>/dev/null" for u in ulimits) + "\n"
        'cd -- "$2" || exit 126\n'
        f'(c=$1; set --; eval "$c") {report_fd}>&-\n'
        "rc=$?\n"
        "p=(/proc/[0-9]*)\n"
        "IFS= read -r -d '' a < /proc/net/snmp; IFS= read -r -d '' b < /proc/net/snmp6; r=$a$b\n"
        f"printf '{REPORT_MARK} rc=%s procs=%s\\n%s' \"$rc\" \"${{#p[@]}}\" \"$r\" >&{report_fd}\n"
        "exit $rc\n"
    )


class BoundedCapture:
    """Keeps the first and last ``keep/2`` bytes of a stream and counts the rest (so a chatty command cannot
    exhaust the host's memory)."""

    def __init__(self, keep: int) -> None:
        self.half = max(1, keep // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if self.dropped <= 0:
            return (bytes(self.head) + bytes(self.tail)).decode(errors="replace")
        note = f"\n[... {self.dropped} bytes of output omitted: the sandbox keeps the first and last " \
               f"{self.half} bytes ...]\n"
        return bytes(self.head).decode(errors="replace") + note + bytes(self.tail).decode(errors="replace")


def _drain(stream: IO[bytes], sink: Callable[[bytes], None]) -> None:
    try:
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                return
            sink(chunk)
    except (OSError, ValueError):
        return
    finally:
        stream.close()


@dataclass
class RawRun:
    returncode: int
    stdout: BoundedCapture
    stderr: BoundedCapture
    report: str
    seconds: float
    killed_reason: str
    peak_processes: int


def run_bwrap(argv: list[str], *, report_w: int, report_r: int, limits: SandboxLimits, timeout: float,
              stdin_data: bytes | None, check: Callable[[], str], env: dict[str, str] | None = None,
              extra_fds: tuple[int, ...] = ()) -> RawRun:
    """Start ``argv``, watch it, kill the tree on a limit. ``check()`` is called every poll interval and returns a
    kill reason ('' to go on): the caller's disk-quota test."""
    out, err = BoundedCapture(limits.max_output_bytes), BoundedCapture(limits.max_output_bytes)
    report = bytearray()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(report_w, *extra_fds), start_new_session=True, close_fds=True,
            # Rationale: bubblewrap's own process (pid 1 inside, the sandbox's uid) keeps the environment it was
            # started with, readable at /proc/1/environ from inside: it gets none of the host's.
            env=env if env is not None else {})
    finally:
        os.close(report_w)
    procs.register_group(proc.pid)
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out.feed), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err.feed), daemon=True),
        threading.Thread(target=_drain, args=(os.fdopen(report_r, "rb"), report.extend), daemon=True),
    ]
    for t in readers:
        t.start()
    if stdin_data is not None and proc.stdin is not None:
        threading.Thread(target=_feed_stdin, args=(proc.stdin, stdin_data), daemon=True).start()
    deadline = started + timeout
    reason = ""
    peak = 0
    pidfd = _pidfd(proc.pid)
    while True:
        if _exited(proc, pidfd, min(limits.poll_s, max(0.0, deadline - time.monotonic()))):
            break
        if time.monotonic() >= deadline:
            reason = "timeout"
        elif out.total + err.total > limits.output_kill_bytes:
            reason = "output"
        else:
            peak = max(peak, len(descendants(proc.pid)))
            reason = check()
        if reason:
            peak = max(peak, kill_tree(proc))
            break
    if pidfd is not None:
        os.close(pidfd)
    procs.unregister_group(proc.pid)
    for t in readers:
        t.join(timeout=5)
    seconds = time.monotonic() - started
    code = proc.returncode if not reason else (TIMEOUT_EXIT if reason == "timeout" else KILLED_EXIT)
    text = report.decode(errors="replace")
    for match in re.finditer(REPORT_MARK + r" rc=-?\d+ procs=(\d+)", text):
        peak = max(peak, int(match.group(1)) - 1)
    return RawRun(code, out, err, text, seconds, reason, peak)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(proc: subprocess.Popen, pidfd: int | None, wait_s: float) -> bool:
    """Wait up to ``wait_s`` for ``proc`` to end; a pidfd wakes us the moment it does (Popen.wait with a timeout
    polls with sleeps of up to 50 ms, which would be most of a short command's overhead)."""
    if pidfd is not None:
        ready, _, _ = select.select([pidfd], [], [], wait_s)
        if not ready:
            return False
        proc.wait()
        return True
    try:
        proc.wait(timeout=wait_s)
        return True
    except subprocess.TimeoutExpired:
        return False


def _feed_stdin(stream: IO[bytes], data: bytes) -> None:
    try:
        stream.write(data)
    except OSError:
        pass
    finally:
        try:
            stream.close()
        except OSError:
            pass


def kill_tree(proc: subprocess.Popen) -> int:
    """SIGKILL every process below bwrap (the sandbox's PID 1 first: its death ends the whole PID namespace),
    then bwrap's process group if it has not exited; return how many processes there were.

    The processes inside are killed before bwrap so that bwrap reaps its child (killing bwrap first would leave
    the sandbox's PID 1 to the host's init to reap)."""
    pids = descendants(proc.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return len(pids)
