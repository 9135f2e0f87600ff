"""Resource limits of one sandbox and the result types of a command run in it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10

Identity = Literal["auto", "userns", "setuid"]


@dataclass(frozen=True)
class SandboxLimits:
    """What one command may use. ``None`` turns a limit off.

    Attributes:
        timeout_s: wall time of one command; on expiry the whole process tree (its PID namespace) is killed.
        cpu_seconds: CPU time of each process (RLIMIT_CPU).
        memory_bytes: address space of each process (RLIMIT_AS); nvcc and ``import torch`` need several GiB.
        max_processes: processes and threads of the sandbox's user at once (RLIMIT_NPROC); stops fork bombs.
            Threads count: leave room for torch's thread pools on many-core hosts.
        max_file_bytes: largest file a command may write (RLIMIT_FSIZE).
        disk_quota_bytes: total size of the workspace; a command that grows it past this is killed.
        tmp_bytes: size of the private /tmp (a tmpfs, so it is memory).
        max_output_bytes: stdout and stderr each keep this much (head and tail); the rest is dropped with a note.
        output_kill_bytes: a command that prints more than this in total is killed.
        poll_s: how often a running command's disk use and process count are sampled.
    """

    timeout_s: float = 120.0
    cpu_seconds: int | None = 600
    memory_bytes: int | None = 16 * GiB
    max_processes: int | None = 256
    max_file_bytes: int | None = 512 * MiB
    disk_quota_bytes: int | None = 2 * GiB
    tmp_bytes: int = 1 * GiB
    max_output_bytes: int = 64 * KiB
    output_kill_bytes: int = 64 * MiB
    poll_s: float = 0.2


@dataclass(frozen=True)
class Violation:
    """One attempt to leave the sandbox or exceed a limit.

    ``kind`` is one of: read_outside, write_outside, network, fork_bomb, disk_quota, file_size, protected_file,
    kill_outside, monitor, unsafe_file (a symlink out of the workspace or a FIFO, removed). ``evidence`` says how
    it was seen: ``effect`` (measured: a canary file opened, packets with no route, a checksum changed, the workspace grew past its quota, the process limit reached), ``blocked``
    (the kernel refused and the error text names the target), ``command`` (the command text names a forbidden
    path) or ``api`` (a read_file/write_file call).
    """

    kind: str
    detail: str
    evidence: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail, "evidence": self.evidence}


@dataclass(frozen=True)
class ExecResult:
    """A finished command.

    ``returncode`` is the command's exit status (128 + N when killed by signal N, as a shell reports it; -1 when
    the sandbox killed it on timeout). ``stdout``/``stderr`` are trimmed to the output budget with a note saying
    how much was dropped.
    """

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    seconds: float = 0.0
    truncated_bytes: int = 0
    violations: tuple[Violation, ...] = field(default_factory=tuple)
    killed_reason: str = ""
    peak_processes: int = 0

    @property
    def success(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def exit_code(self) -> int:
        return self.returncode

    @property
    def output(self) -> str:
        """stdout then stderr, as one text for an agent observation."""
        if self.stdout and self.stderr and not self.stdout.endswith("\n"):
            return self.stdout + "\n" + self.stderr
        return self.stdout + self.stderr
