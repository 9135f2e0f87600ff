"""The channel between the judge and the candidate process (requests one way, results the other): length-prefixed
JSON on a Unix stream socket, with file descriptors (shared memory) attached through SCM_RIGHTS.

Standard library only: the sandboxed candidate imports this module too.
"""
from __future__ import annotations

import array
import json
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct("<I")
MAX_MESSAGE = 64 << 20
MAX_FDS = 64


class WireError(Exception):
    """The other side sent something that is not a message."""


class WireClosed(WireError):
    """The other side closed the connection (at a message boundary or in the middle of one)."""


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send one message (and ``fds``, attached to its first byte)."""
    payload = json.dumps(message, separators=(",", ":"), allow_nan=True).encode()
    if len(payload) > MAX_MESSAGE:
        raise WireError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE}")
    data = _HEADER.pack(len(payload)) + payload
    if fds:
        sent = sock.sendmsg([data[:1]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[sent:]
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise WireClosed("the connection closed in the middle of a message")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def wait_readable(sock: socket.socket, spin_s: float, clock: Any = time.process_time) -> None:
    """Poll ``sock`` without sleeping for up to ``spin_s`` seconds of ``clock`` (by default this process's CPU time,
    which stands still while the process is stopped), then return (the caller's blocking read follows). Rationale:
    a reply or a request that lands while its reader is asleep waits for the scheduler to wake it, tens to hundreds
    of microseconds that depend on how long it slept; the judge's clock must not carry that noise."""
    end = clock() + spin_s
    while clock() < end:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            return


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One message and the file descriptors that came with it. Raises WireError when the peer has gone or the
    message is malformed."""
    fds: list[int] = []
    data, ancillary, _flags, _addr = sock.recvmsg(1, socket.CMSG_LEN(MAX_FDS * 4))
    if not data:
        raise WireClosed("the connection closed")
    for level, kind, blob in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(blob) - len(blob) % 4
            fds.extend(array.array("i", blob[:usable]))
    header = data + _recv_exact(sock, _HEADER.size - 1)
    (length,) = _HEADER.unpack(header)
    if length > MAX_MESSAGE:
        for fd in fds:
            _close(fd)
        raise WireError(f"message of {length} bytes exceeds {MAX_MESSAGE}")
    try:
        message = json.loads(_recv_exact(sock, length))
    except ValueError as exc:
        for fd in fds:
            _close(fd)
        raise WireError(f"not a JSON message: {exc}") from exc
    if not isinstance(message, dict):
        raise WireError("a message must be a JSON object")
    return message, fds


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass
