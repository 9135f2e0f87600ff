"""A tiny seccomp filter for ``setuid`` sandboxes: no new user namespaces.

In a ``userns`` sandbox bubblewrap's ``--disable-userns`` does this. A ``setuid`` sandbox has no user namespace of
its own, so an unprivileged user inside could otherwise make one and be "root" in it: not an escape by itself, but
a much larger kernel surface. The filter makes unshare/clone with CLONE_NEWUSER fail with EPERM and clone3 (whose
flags a filter cannot read) fail with ENOSYS, on which the C library falls back to clone.
"""
from __future__ import annotations

import errno
import platform
import struct

_LD_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_CLONE_NEWUSER = 0x10000000

# machine -> (audit arch, unshare, clone, clone3)
_ARCHES = {
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def no_userns_filter() -> bytes | None:
    """The BPF program for this machine, or None where its system-call numbers are not known here."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        return None
    audit, unshare, clone, clone3 = arch
    prog = [
        _insn(_LD_ABS, 0, 0, 4),                  # 0: A = arch (jumps count from the next instruction)
        _insn(_JEQ, 1, 0, audit),                 # 1: native arch -> 3
        _insn(_RET, 0, 0, _ERRNO | errno.EPERM),  # 2: other ABIs (x32, i386 emulation) refused outright
        _insn(_LD_ABS, 0, 0, 0),                  # 3: A = syscall number
        _insn(_JGE, 7, 0, 0x40000000),            # 4: x32 numbers -> 12 (EPERM)
        _insn(_JEQ, 3, 0, unshare),               # 5: -> 9
        _insn(_JEQ, 2, 0, clone),                 # 6: -> 9
        _insn(_JEQ, 5, 0, clone3),                # 7: -> 13
        _insn(_RET, 0, 0, _ALLOW),                # 8
        _insn(_LD_ABS, 0, 0, 16),                 # 9: A = low 32 bits of args[0] (the flags)
        _insn(_JSET, 1, 0, _CLONE_NEWUSER),       # 10: -> 12
        _insn(_RET, 0, 0, _ALLOW),                # 11
        _insn(_RET, 0, 0, _ERRNO | errno.EPERM),  # 12
        _insn(_RET, 0, 0, _ERRNO | errno.ENOSYS),  # 13: clone3
    ]
    return b"".join(prog)
