"""Kernels compiled at their first launch (Triton), inside the candidate's one-process sandbox.

The candidate's process may not start programs (`confine`), and Triton starts three: ptxas for every kernel (and
``ptxas --version``), a C compiler once for its runtime helper (``cuda_utils``, built from Triton's own driver.c), and
``ldconfig -p`` to find libcuda. `install` routes them without any new process here:

* ptxas goes to the compile broker (`broker`), a process in a sandbox of its own, over the socket the judge handed
  this process at its start; only the program the judge named is served, with options from a fixed list.
* the C compiler, when it compiles Triton's own driver.c (checked by its SHA-256), is answered with the helper the
  judge built ahead (trusted code, cached) and left in the scratch folder's ``.jit``; any other C compilation (the
  launcher Triton before 3.7 builds for each kernel signature) goes to the broker, which runs the host's C compiler
  with options from a fixed list, or is refused where the broker has none.
* ``TRITON_LIBCUDA_PATH`` names libcuda's folder, so ldconfig is not needed.

Everything else that tries to start a program gets a PermissionError that says why. Standalone (standard library).
"""
from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
from typing import Any

from . import channel
from .broker import C_TOOL

PREBUILT_DIR = ".jit"  # in the process's starting folder, its scratch folder (``judge.jit.HELPER_DIR``)
PREBUILT_INDEX = "index.json"
_LIBCUDA_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64",
                 "/usr/local/nvidia/lib", "/usr/lib/wsl/lib", "/usr/local/cuda/compat")
_C_COMPILERS = frozenset({"cc", "gcc", "clang", "c++", "g++", "clang++"})


class _Client:
    """The candidate's end of the compile broker's socket (one request at a time)."""

    def __init__(self, fd: int, tools: dict[str, str]) -> None:
        self.sock = socket.socket(fileno=fd)
        # the programs routed by their path (ptxas); the C compiler is routed by what it compiles (`_helper_build`)
        self.tools = {os.path.realpath(path): name for name, path in tools.items() if name != C_TOOL}
        self.compiles_c = C_TOOL in tools
        self.lock = threading.Lock()

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            try:
                channel.send(self.sock, message)
                reply, fds = channel.receive(self.sock)
            except (OSError, channel.WireError) as exc:
                raise RuntimeError(f"the evaluator's compile broker is gone ({exc})") from exc
        for fd in fds:
            os.close(fd)
        return reply


_client: _Client | None = None
_prebuilt_dir = PREBUILT_DIR
_original_run = subprocess.run
_original_call = subprocess.call


def install(fd: int | None, tools: dict[str, str]) -> None:
    """Route Triton's programs as the module says. ``fd``: the socket to the broker (None: no broker, so ptxas is
    refused like any other program); ``tools``: name -> path of the programs the broker serves."""
    global _client, _prebuilt_dir
    _prebuilt_dir = os.path.abspath(PREBUILT_DIR)
    if fd is not None:
        _client = _Client(fd, tools)
    if "TRITON_LIBCUDA_PATH" not in os.environ:
        folders = [*filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")), *_LIBCUDA_DIRS]
        found = next((d for d in folders if os.path.isfile(os.path.join(d, "libcuda.so.1"))), None)
        if found:
            os.environ["TRITON_LIBCUDA_PATH"] = found
    subprocess.run = _run  # type: ignore[assignment]
    subprocess.call = _call  # type: ignore[assignment]


def _argv(popenargs: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str] | None:
    args = popenargs[0] if popenargs else kwargs.get("args")
    if isinstance(args, (list, tuple)) and args and not kwargs.get("shell"):
        return [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    return None


def _refused(program: str, exc: BaseException) -> PermissionError:
    return PermissionError(errno.EPERM, f"the evaluator's candidate process starts no programs ({program}): "
                                        "Triton's ptxas is served by the evaluator's compile broker, and nothing "
                                        f"else runs ({exc})")


def _run(*popenargs: Any, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    argv = _argv(popenargs, kwargs)
    name = _client.tools.get(os.path.realpath(argv[0])) if argv and _client is not None else None
    if argv and name is not None:
        return _served(name, argv, kwargs)
    if argv and _is_helper_build(argv):
        return subprocess.CompletedProcess(argv, _helper_build(argv, kwargs.get("cwd")))
    try:
        return _original_run(*popenargs, **kwargs)
    except PermissionError as exc:
        raise _refused(argv[0] if argv else str(popenargs[:1]), exc) from exc


def _call(*popenargs: Any, **kwargs: Any) -> int:
    argv = _argv(popenargs, kwargs)
    if argv and (_is_helper_build(argv) or (_client is not None and os.path.realpath(argv[0]) in _client.tools)):
        return _run(*popenargs, **kwargs).returncode
    try:
        return _original_call(*popenargs, **kwargs)
    except PermissionError as exc:
        raise _refused(argv[0] if argv else str(popenargs[:1]), exc) from exc


# -- ptxas through the broker -------------------------------------------------------------------------------------
def _served(name: str, argv: list[str], kwargs: dict[str, Any]) -> subprocess.CompletedProcess[Any]:
    """Run ``argv`` (a ptxas command line) through the broker, as subprocess.run would have run it."""
    assert _client is not None
    cwd = kwargs.get("cwd") or os.getcwd()
    output = None
    if argv[1:] == ["--version"]:
        reply = _client.request({"op": "version", "tool": name})
    else:
        options, source, output = _split(argv[1:])
        if source is None or output is None:
            reply = {"ok": True, "rc": 2, "stdout": "", "stderr": "the compile broker runs ptxas on one .ptx file "
                                                                    "with -o OUTPUT only"}
        else:
            with open(os.path.join(cwd, source), errors="replace") as fh:
                reply = _client.request({"op": "compile", "tool": name, "options": options, "ptx": fh.read()})
    if not reply.get("ok"):
        reply = {"rc": 2, "stdout": "", "stderr": f"refused by the compile broker: {reply.get('reason')}"}
    rc = int(reply.get("rc", 1))
    if rc == 0 and output is not None and reply.get("cubin"):
        with open(os.path.join(cwd, output), "wb") as fh:
            fh.write(base64.b64decode(reply["cubin"]))
    out_bytes = str(reply.get("stdout", "")).encode()
    err_bytes = str(reply.get("stderr", "")).encode()
    capture = bool(kwargs.get("capture_output"))
    err_target = kwargs.get("stderr")
    if err_target == subprocess.STDOUT:
        out_bytes, err_bytes, err_target = out_bytes + err_bytes, b"", subprocess.DEVNULL
    stdout = _deliver(out_bytes, subprocess.PIPE if capture else kwargs.get("stdout"), 1)
    stderr = _deliver(err_bytes, subprocess.PIPE if capture else err_target, 2)
    text = bool(kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding"))
    out = stdout.decode() if text and isinstance(stdout, bytes) else stdout
    err = stderr.decode() if text and isinstance(stderr, bytes) else stderr
    if kwargs.get("check") and rc != 0:
        raise subprocess.CalledProcessError(rc, argv, out, err)
    return subprocess.CompletedProcess(argv, rc, out, err)


def _split(args: list[str]) -> tuple[list[str], str | None, str | None]:
    """(options, the .ptx input, the -o output) of a ptxas command line."""
    options: list[str] = []
    source = output = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "--output-file") and i + 1 < len(args):
            output = args[i + 1]
            i += 2
            continue
        if arg.startswith("--output-file="):
            output = arg.split("=", 1)[1]
        elif arg.endswith(".ptx") and not arg.startswith("-"):
            source = arg
        else:
            options.append(arg)
        i += 1
    return options, source, output


def _deliver(data: bytes, target: Any, default_fd: int) -> bytes | None:
    """Put a stream's bytes where subprocess.run's ``stdout``/``stderr`` argument says: the bytes for a PIPE, else
    written to the file, descriptor or inherited stream, and None."""
    if target == subprocess.PIPE:
        return data
    if target == subprocess.DEVNULL or not data:
        return None
    fd = target if isinstance(target, int) else target.fileno() if hasattr(target, "fileno") else default_fd
    os.write(fd, data)
    return None


# -- Triton's runtime helper, prebuilt by the judge --------------------------------------------------------------
def _prebuilt() -> dict[str, Any]:
    try:
        with open(os.path.join(_prebuilt_dir, PREBUILT_INDEX)) as fh:
            index = json.load(fh)
        return index if isinstance(index, dict) else {}
    except (OSError, ValueError):
        return {}


def _is_helper_build(argv: list[str]) -> bool:
    return os.path.basename(argv[0]) in _C_COMPILERS or argv[0] == os.environ.get("CC")


def _helper_build(argv: list[str], cwd: str | None) -> int:
    """Answer a C compilation: with the prebuilt helper where the source is byte-identical to the one the judge
    built, else through the broker (Triton's per-signature launcher). Raises PermissionError where neither can."""
    index = _prebuilt()
    cwd = cwd or os.getcwd()
    output = argv[argv.index("-o") + 1] if "-o" in argv[:-1] else None
    sources = []
    for arg in argv[1:]:
        path = os.path.join(cwd, arg)
        if arg.startswith("-") or not arg.endswith((".c", ".cc", ".cpp")) or not os.path.isfile(path):
            continue
        sources.append(path)
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        entry = index.get(digest)
        if output is not None and isinstance(entry, dict) and entry.get("file"):
            shutil.copyfile(os.path.join(_prebuilt_dir, os.path.basename(str(entry["file"]))),
                            os.path.join(cwd, output))
            return 0
    if _client is not None and _client.compiles_c and output is not None and len(sources) == 1:
        return _brokered_c(argv, sources[0], os.path.join(cwd, output))
    raise PermissionError(errno.EPERM, f"the evaluator's candidate process compiles no C code ({' '.join(argv[:2])}"
                                       "): only Triton's own runtime helper is provided, prebuilt")


def _brokered_c(argv: list[str], source: str, output: str) -> int:
    """One C file built into a shared library by the broker (the options but the source and ``-o`` are sent as
    given; the broker refuses any it does not allow). Raises CalledProcessError-like failures as Triton expects:
    a non-zero return code, with the compiler's messages on stderr."""
    assert _client is not None
    skip = {argv.index("-o"), argv.index("-o") + 1}
    options = [a for i, a in enumerate(argv[1:], start=1)
               if i not in skip and (a.startswith("-") or not a.endswith((".c", ".cc", ".cpp")))]
    with open(source, errors="replace") as fh:
        reply = _client.request({"op": "cc", "tool": C_TOOL, "options": options, "source": fh.read()})
    if not reply.get("ok"):
        os.write(2, f"refused by the compile broker: {reply.get('reason')}\n".encode())
        return 2
    rc = int(reply.get("rc", 1))
    if rc == 0 and reply.get("library"):
        with open(output, "wb") as fh:
            fh.write(base64.b64decode(reply["library"]))
        return 0
    os.write(2, (str(reply.get("stderr", ""))[-4000:] + "\n").encode())
    return rc or 1
