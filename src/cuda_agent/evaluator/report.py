"""The sealed report channel: how an evaluation process hands its result to the trusted process that started it.

Why: candidate code runs inside the evaluation process, so whatever that process holds, the candidate can use.
The result used to go back over a socket the evaluation inherited: a candidate that wrote a made-up "timed,
reward 3" line to every file descriptor it held and then exited was believed (reproduced through the warm worker,
the pool's path: reward 3 for a model that computed nothing). Now:

- the evaluation holds no channel while candidate code can run: it closes what it inherited before it loads
  anything, and connects to the trusted side's listening socket (`ReportInbox`) only after the evaluation is over;
- the audit hook refuses sockets, process spawns, threads and interpreter hooks (trace, profile, audit, monitoring)
  asked for by candidate code (`checks.audit`), so candidate Python code cannot open a channel of its own or arrange
  to run while the real one is open;
- before connecting, the sender (`make_sender`) seals the interpreter: trace and profile functions cleared, the
  garbage collector off (no finalizer or gc callback runs), signals blocked and ignored, interval timers stopped;
- Python threads that were not there when the evaluation began make it withhold its report (exit code
  `WITHHELD_EXIT`): such a thread could write to the channel between connect and send (threads raise no audit
  event before Python 3.13, so they cannot be refused when they start);
- the JSON encoder is checked against its state at import before it encodes the result, and every module-level
  name and class attribute of ``cuda_agent`` against its state when the sender was made (a trusted function
  replaced through ``sys.modules`` raises no audit event);
- the trusted side takes a report only from the evaluation's own process id (``SO_PEERCRED``), and exactly one; a
  report from any other process, or a second one, is tampering (rule ``report_tampering``).

What this does not stop: native code in the candidate's extension runs with the process's rights.
"""
from __future__ import annotations

import gc
import json
import json.encoder
import os
import secrets
import select
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

_PEERCRED = struct.Struct("3i")  # pid, uid, gid
MAX_REPORT_BYTES = 64 << 20
WITHHELD_EXIT = 87  # the evaluation withheld its report: Python threads it did not start were running

# Bound at import, before any candidate code exists in this process.
_socket = socket.socket
_settrace = sys.settrace
_setprofile = sys.setprofile
_monitoring = getattr(sys, "monitoring", None)
_gc_disable = gc.disable
_gc_callbacks = gc.callbacks
_sigmask = signal.pthread_sigmask
_setitimer = signal.setitimer
_set_handler = signal.signal
_signals = tuple(signal.valid_signals())
# Faults keep their default action (ignoring a real fault would spin); SIGKILL and SIGSTOP cannot be handled.
_UNTOUCHED_SIGNALS = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE,
                                signal.SIGILL, signal.SIGTRAP, signal.SIGSYS, signal.SIGABRT})
_dumps = json.dumps
_current_frames = sys._current_frames
_get_ident = threading.get_ident


def _encoder_snapshot() -> dict[str, Any]:
    enc = json.encoder
    return {
        "json.dumps": json.dumps, "json._default_encoder": json._default_encoder,
        "json.encoder.c_make_encoder": enc.c_make_encoder, "json.encoder.encode_basestring": enc.encode_basestring,
        "json.encoder.encode_basestring_ascii": enc.encode_basestring_ascii,
        "json.encoder._make_iterencode": enc._make_iterencode, "json.encoder.JSONEncoder": enc.JSONEncoder,
        "JSONEncoder.encode": enc.JSONEncoder.encode, "JSONEncoder.iterencode": enc.JSONEncoder.iterencode,
        "JSONEncoder.default": enc.JSONEncoder.default,
    }


_encoder_parts = _encoder_snapshot()
_encoder_state = dict(vars(json._default_encoder))
_TAMPERED_ENCODER = (b'{"tampered": "the JSON encoder the evaluator reports with was replaced after the candidate '
                     b'loaded"}\n')


def _encoder_changes() -> list[str]:
    now = _encoder_snapshot()
    changed = [name for name, obj in _encoder_parts.items() if now[name] is not obj]
    if vars(_encoder_parts["json._default_encoder"]) != _encoder_state:
        changed.append("json._default_encoder's settings")
    return changed


def seal_interpreter() -> None:
    """From here on no candidate Python code runs in this thread: trace and profile functions cleared, monitoring
    tools switched off, the garbage collector off and its callbacks dropped, every signal blocked in this thread and
    ignored (faults excepted), interval timers stopped. For a process that is about to report and exit."""
    _settrace(None)
    _setprofile(None)
    if _monitoring is not None:
        for tool in range(6):
            try:
                _monitoring.set_events(tool, 0)
            except (ValueError, RuntimeError):
                pass
    _gc_disable()
    del _gc_callbacks[:]
    _sigmask(signal.SIG_BLOCK, _signals)
    for which in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
        _setitimer(which, 0)
    for sig in _signals:
        if sig in _UNTOUCHED_SIGNALS:
            continue
        try:  # ignored, not default: a signal sent to the process may land on a native thread that does not block it
            _set_handler(sig, signal.SIG_IGN)
        except (OSError, ValueError, RuntimeError):
            pass


def python_thread_ids() -> frozenset[int]:
    """The ids of the threads now running Python code, from the interpreter's frames (so including threads started
    through ``_thread``, which `checks.integrity.python_threads`, built on ``threading``, does not list)."""
    return frozenset(_current_frames())


# Module-level names that legitimately change during an evaluation.
_CHANGING = frozenset({("cuda_agent.build.runtime", "_active_library")})
_MISSING = object()


def _namespace(prefix: str) -> dict[tuple[str, str], Any]:
    """Every module-level name of the loaded ``prefix`` modules, and every attribute of the classes they define,
    with the object it is bound to now."""
    out: dict[tuple[str, str], Any] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        for key, obj in list(vars(module).items()):
            if (name, key) in _CHANGING:
                continue
            out[(name, key)] = obj
            if isinstance(obj, type) and getattr(obj, "__module__", None) == name:
                for attr, value in list(vars(obj).items()):
                    out[(name, f"{key}.{attr}")] = value
    return out


def make_sender(prefix: str = "cuda_agent") -> Any:
    """The evaluation's sender, bound now, before candidate code exists: ``send(address, payload, threads_before)``
    seals the interpreter, then sends ``payload`` (``{"result": ...}`` or ``{"error": ...}``) as one JSON line on a
    fresh connection to ``address``, and returns True. It returns False without connecting when Python threads
    other than ``threads_before`` (those alive when the candidate loaded; None: it never loaded) and this one are
    alive; the caller then exits with `WITHHELD_EXIT`. If any module-level name or class attribute of the
    ``prefix`` modules was rebound since the sender was made (a trusted function replaced through ``sys.modules``,
    which no audit event reports), or the JSON encoder was, it reports tampering instead of the payload.
    Everything it uses is bound in its closure. Raises OSError when the trusted side is gone."""
    before = _namespace(prefix)
    modules, _vars, _isinstance, _type, _getattr = sys.modules, vars, isinstance, type, getattr
    seal, threads_now, encoder_changes, dumps, new_socket = (seal_interpreter, python_thread_ids, _encoder_changes,
                                                             _dumps, _socket)
    me, tampered_encoder = _get_ident, _TAMPERED_ENCODER

    def rebound() -> list[str]:
        changed = []
        for (name, key), obj in before.items():
            module = modules.get(name)
            if module is None:
                changed.append(f"{name} (module removed)")
                continue
            owner, _, attr = key.partition(".")
            if attr:
                cls = _vars(module).get(owner)
                now = _vars(cls).get(attr, _MISSING) if _isinstance(cls, _type) else _MISSING
            else:
                now = _vars(module).get(key, _MISSING)
            if now is not obj:
                changed.append(f"{name}.{key}")
        return changed

    def send(address: str, payload: dict[str, Any], threads_before: frozenset[int] | None) -> bool:
        seal()
        if threads_before is not None and threads_now() - threads_before - {me()}:
            return False
        changed = rebound()
        if changed:
            data = (dumps({"tampered": "the evaluator's own functions were replaced after the candidate loaded: "
                                       + ", ".join(changed[:5])}) + "\n").encode()
        else:
            data = tampered_encoder if encoder_changes() else (dumps(payload) + "\n").encode()
        sock = new_socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(address)
            sock.sendall(data)
        finally:
            sock.close()
        return True

    return send


class ReportInbox:
    """The trusted side: a listening socket at a fresh abstract address; `poll` while the evaluation runs, then
    `verdict(pid)` once it has ended. Use as a context manager or call `close`."""

    def __init__(self) -> None:
        self.address = "\0cuda-agent-report-" + secrets.token_hex(16)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.address)
        self._listener.listen(16)
        self._listener.setblocking(False)
        self._open: dict[socket.socket, tuple[int, bytearray]] = {}
        self._reports: list[tuple[int, bytes | None]] = []  # (sender pid, bytes; None when over the size cap)

    def __enter__(self) -> "ReportInbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the listener and every open connection (in the evaluation process: right after the fork, so that
        it holds nothing of the trusted side's)."""
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._listener.close()

    def poll(self, timeout_s: float, wake_fd: int | None = None) -> None:
        """Accept connections and read what has arrived, waiting at most ``timeout_s`` (less if ``wake_fd``, e.g. a
        process's pidfd, becomes readable)."""
        if self._listener.fileno() < 0:
            return
        extra = [wake_fd] if wake_fd is not None else []
        readable, _, _ = select.select([self._listener, *self._open, *extra], [], [], max(0.0, timeout_s))
        for sock in readable:
            if not isinstance(sock, socket.socket):  # the wake-up descriptor
                continue
            if sock is self._listener:
                self._accept()
            else:
                self._read(sock)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            conn.setblocking(False)
            self._open[conn] = (_PEERCRED.unpack(creds)[0], bytearray())

    def _read(self, conn: socket.socket) -> None:
        pid, buf = self._open[conn]
        try:
            chunk = conn.recv(1 << 20)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk and len(buf) + len(chunk) <= MAX_REPORT_BYTES:
            buf += chunk
            return
        del self._open[conn]
        conn.close()
        self._reports.append((pid, bytes(buf) if not chunk else None))

    def _progress(self) -> tuple[int, int, int]:
        return len(self._reports), sum(len(b) for _, b in self._open.values()), len(self._open)

    def drain(self, quiet_s: float = 0.01, limit_s: float = 5.0) -> None:
        """Poll until nothing new arrives for ``quiet_s`` (at most ``limit_s``); connections still open then are
        dropped unread. Called once the reporting process has ended, when all it sent is already buffered."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            before = self._progress()
            self.poll(quiet_s)
            if self._progress() == before:
                break
        for conn in list(self._open):
            del self._open[conn]
            conn.close()

    def verdict(self, pid: int) -> tuple[dict[str, Any] | None, str]:
        """``(payload, "")`` when exactly one complete report came from process ``pid`` and none from anywhere
        else; ``(None, why)`` when something else reported or ``pid`` reported twice (tampering); ``(None, "")``
        when nothing usable arrived (the process died before reporting)."""
        self.drain()
        foreign = sorted({sender for sender, _ in self._reports if sender != pid})
        own = [data for sender, data in self._reports if sender == pid]
        if foreign:
            return None, (f"a result was reported by process {', '.join(map(str, foreign))}, not by the evaluation "
                          f"(process {pid})")
        if len(own) > 1:
            return None, f"the evaluation process reported {len(own)} times; it reports once"
        if not own or own[0] is None:
            return None, "" if not own else "the report was larger than the evaluator ever writes"
        try:
            payload = json.loads(own[0].decode())
        except (UnicodeDecodeError, ValueError):
            return None, ""  # cut short: the process died while reporting
        if not isinstance(payload, dict):
            return None, "the report is not a JSON object"
        return payload, ""


def wait_for_report(inbox: ReportInbox, pid: int, exited: Any, deadline: float) -> tuple[bool, int | None]:
    """Poll ``inbox`` until ``exited()`` returns the exit code of process ``pid`` (not None) or ``deadline``
    (time.monotonic) passes; return (finished in time, exit code). Wakes as soon as the process ends (pidfd)."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            code = exited()
            if code is not None:
                return True, code
            if time.monotonic() >= deadline:
                return False, None
            inbox.poll(min(0.05, max(0.0, deadline - time.monotonic())), pidfd)
    finally:
        if pidfd is not None:
            os.close(pidfd)
