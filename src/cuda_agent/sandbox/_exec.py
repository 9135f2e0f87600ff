"""Run one bubblewrap command: bounded output capture, the in-sandbox wrapper that sets limits and reports the
network counters, and the watch loop that kills the whole process tree on a limit."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Callable

from cuda_agent.sandbox._limits import SandboxLimits
from cuda_agent.sandbox._monitor import descendants

REPORT_MARK = "CUDA_AGENT_REPORT"
TIMEOUT_EXIT = 124
KILLED_EXIT = 137


def wrapper_script(limits: SandboxLimits, report_fd: int) -> str:
    """bash run inside as ``bash -c WRAPPER name COMMAND CWD``: set the limits (soft and hard, so the command
    cannot raise them), run COMMAND in a child bash that does not hold the report pipe, then write the network
    namespace's counters to the report pipe using builtins only (no extra process)."""
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
        "; ".join(ulimits) + " || exit 125\n"
        'cd -- "$2" || exit 126\n'
        f'/bin/bash -c "$1" {report_fd}>&-\n'
        "rc=$?\n"
        "r=''; for f in /proc/net/snmp /proc/net/snmp6; do\n"
        "  while IFS= read -r l; do r+=\"$l\"$'\\n'; done < \"$f\"\n"
        "done 2>/dev/null\n"
        f"printf '{REPORT_MARK} rc=%s\\n%s' \"$rc\" \"$r\" >&{report_fd}\n"
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
              stdin_data: bytes | None, check: Callable[[], str], env: dict[str, str] | None = None) -> RawRun:
    """Start ``argv``, watch it, kill the tree on a limit. ``check()`` is called every poll interval and returns a
    kill reason ('' to go on): the caller's disk-quota test."""
    out, err = BoundedCapture(limits.max_output_bytes), BoundedCapture(limits.max_output_bytes)
    report = bytearray()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, pass_fds=(report_w,), start_new_session=True, close_fds=True, env=env)
    finally:
        os.close(report_w)
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
    while True:
        try:
            proc.wait(timeout=limits.poll_s)
            break
        except subprocess.TimeoutExpired:
            pass
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
    for t in readers:
        t.join(timeout=5)
    seconds = time.monotonic() - started
    code = proc.returncode if not reason else (TIMEOUT_EXIT if reason == "timeout" else KILLED_EXIT)
    return RawRun(code, out, err, report.decode(errors="replace"), seconds, reason, peak)


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
    """SIGKILL the bwrap process group and every process below it; return how many processes there were.

    Killing bwrap alone would do (``--die-with-parent`` kills the sandbox's PID 1, and with it the whole PID
    namespace), but each process is also killed by pid so nothing depends on that chain."""
    pids = descendants(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return len(pids)
