"""One process, no children: the seccomp filter the candidate process installs on itself before anything else.

Why: the judge freezes the candidate between calls (SIGSTOP) and watches its threads from outside; that only holds
if everything the candidate runs lives in this one process. The filter refuses new processes (fork, vfork, clone
without CLONE_THREAD; clone3, whose flags a filter cannot read, answers ENOSYS so the C library falls back to
clone), running programs (execve), tracing or reading other processes (ptrace, process_vm_*), and new namespaces
(unshare, setns). Threads stay allowed (CUDA and PyTorch need them). It is installed by the runner while it is still
the only code in the process, and a seccomp filter cannot be removed.

Standalone (standard library only).
"""
from __future__ import annotations

import ctypes
import errno
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_CLONE_THREAD = 0x00010000
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1

# machine -> audit arch, seccomp syscall number, refused calls, clone, clone3
_ARCHES: dict[str, tuple[int, int, tuple[int, ...], int, int]] = {
    # fork, vfork, execve, execveat, ptrace, process_vm_readv, process_vm_writev, unshare, setns
    "x86_64": (0xC000003E, 317, (57, 58, 59, 322, 101, 310, 311, 272, 308), 56, 435),
    # execve, execveat, ptrace, process_vm_readv, process_vm_writev, unshare, setns (no fork/vfork calls here)
    "aarch64": (0xC00000B7, 277, (221, 281, 117, 270, 271, 97, 268), 220, 435),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def single_process_filter(machine: str | None = None) -> bytes | None:
    """The BPF program for ``machine`` (default: this one), or None where its system calls are not known."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, _seccomp, refused, clone, clone3 = arch
    n = len(refused)
    # Layout: [0] ld arch, [1] jeq audit, [2] ret EPERM, [3] ld nr, [4] jge x32, then n refused checks,
    # clone3 check, clone check, allow, clone-flags block (ld, jset, ret EPERM, ret ALLOW), EPERM, ENOSYS.
    eperm = 5 + n + 2 + 1 + 4
    enosys = eperm + 1
    clone_block = 5 + n + 2 + 1
    prog = [_insn(_LD_W_ABS, 0, 0, 4), _insn(_JEQ_K, 1, 0, audit), _insn(_RET_K, 0, 0, _ERRNO | errno.EPERM),
            _insn(_LD_W_ABS, 0, 0, 0)]
    prog.append(_insn(_JGE_K, eperm - 5, 0, 0x40000000))
    for i, number in enumerate(refused):
        here = 5 + i
        prog.append(_insn(_JEQ_K, eperm - here - 1, 0, number))
    here = 5 + n
    prog.append(_insn(_JEQ_K, enosys - here - 1, 0, clone3))
    here += 1
    prog.append(_insn(_JEQ_K, clone_block - here - 1, 0, clone))
    prog.append(_insn(_RET_K, 0, 0, _ALLOW))
    prog += [
        _insn(_LD_W_ABS, 0, 0, 16),                 # low 32 bits of args[0]: clone's flags
        _insn(_JSET_K, 1, 0, _CLONE_THREAD),        # a thread -> allow
        _insn(_RET_K, 0, 0, _ERRNO | errno.EPERM),  # a new process
        _insn(_RET_K, 0, 0, _ALLOW),
        _insn(_RET_K, 0, 0, _ERRNO | errno.EPERM),
        _insn(_RET_K, 0, 0, _ERRNO | errno.ENOSYS),
    ]
    assert len(prog) == enosys + 1
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def confine_to_one_process() -> bool:
    """Install `single_process_filter` on this process (all threads). Returns False where this machine's system
    calls are unknown; raises OSError when the kernel refuses the filter."""
    machine = platform.machine()
    program = single_process_filter(machine)
    if program is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {errno.errorcode.get(err, err)}")
    buffer = ctypes.create_string_buffer(program)
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    number = _ARCHES[machine][1]
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(number), ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
                    ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp(SET_MODE_FILTER): {errno.errorcode.get(err, err)}")
    return True
