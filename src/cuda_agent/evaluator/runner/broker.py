"""The compile broker: runs fixed compilers (Triton's bundled ptxas, and the host's C compiler for Triton's kernel
launchers) for a candidate whose process may not.

Why: Triton compiles a kernel at its first launch and runs ptxas in a child process, which the candidate's one-process
filter refuses (`confine`); Triton versions before 3.7 also compile a C launcher for each kernel signature
(``__triton_launcher.c``) with the host's C compiler. The broker is a separate process in a sandbox of its own
(``python -m ca_runner.broker``), started by the judge beside the candidate's process and connected to it by a socket
pair and nothing else: no GPU device, no shared region, no file of the judge's, no writable host folder (its /tmp is
private), and another PID namespace than the candidate's, so the candidate cannot name it, signal it or write its
memory. Freezing the candidate (SIGSTOP) therefore still stops everything that can touch the device or the outputs; a
compile the broker is finishing meanwhile touches neither.

What a hostile candidate can send: any PTX (bounded in size) and ptxas options from a fixed allow-list; any C source
(bounded) and C compiler options from a fixed list (optimisation, -shared/-fPIC, include and library folders, library
names: nothing that loads a plugin or names an output); the program, the input and output files and the limits are the
broker's. A shared library built from the candidate's C is no new power: it is loaded into the candidate's own process,
which already runs the candidate's native code; the compiler runs here, where there is nothing to read but the system's
own files. A ptxas crash or hang costs the candidate its compile (a timeout kills it). A ptxas exploited by crafted PTX
runs in the broker's empty sandbox and can reach only the candidate that sent it.

Protocol (`channel` messages on the socket, one request then one reply):
  {"op": "version", "tool": "ptxas"}                          -> {"ok": true, "rc": 0, "stdout": "..."}
  {"op": "compile", "tool": "ptxas", "options": [...], "ptx": "..."}
      -> {"ok": true, "rc": N, "stdout": "...", "stderr": "...", "cubin": base64 or absent}
  {"op": "cc", "tool": "cc", "options": [...], "source": "..."}
      -> {"ok": true, "rc": N, "stdout": "...", "stderr": "...", "library": base64 or absent}
  anything refused -> {"ok": false, "reason": "..."}

Standalone (standard library only): it never imports torch.
"""
from __future__ import annotations

import argparse
import base64
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from typing import Any

from . import channel

MAX_PTX = 32 << 20          # characters of PTX per request
MAX_CUBIN = 32 << 20        # bytes of cubin in a reply (base64 stays under the channel's 64 MiB)
MAX_LOG = 256 << 10         # bytes of each of ptxas's stdout and stderr in a reply
MAX_OPTIONS = 32
MAX_C_SOURCE = 4 << 20      # characters of C per request (Triton's launchers are a few KB)
MAX_LIBRARY = 32 << 20      # bytes of a built shared library in a reply
C_TOOL = "cc"               # the tool name of the C compiler (never a ptxas)
TIMEOUT_S = 180.0
_FILE_LIMIT = 256 << 20     # the largest file ptxas may write
MEMORY_LIMIT = 16 << 30     # the address space of ptxas or the C compiler (the agent's own sandbox has the same)

# ptxas options a candidate may choose (Triton's own, and the usual tuning flags); nothing that names a file.
_EXACT = frozenset({"-lineinfo", "-suppress-debug-info", "-g", "-v", "--verbose", "--fmad=false", "--fmad=true",
                    "-warn-spills", "-warn-lmem-usage", "--warn-on-spills", "--warn-on-local-memory-usage",
                    "--disable-optimizer-constants", "-preserve-relocs"})
_PATTERNS = (re.compile(r"--gpu-name=sm_\d{2,3}[af]?"), re.compile(r"-arch=sm_\d{2,3}[af]?"),
             re.compile(r"--opt-level=[0-3]"), re.compile(r"-O[0-3]"), re.compile(r"--regAllocOptLevel=[0-9]"),
             re.compile(r"--maxrregcount=\d{1,3}"), re.compile(r"-maxrregcount=\d{1,3}"),
             re.compile(r"--allow-expensive-optimizations=(true|false)"))
_TWO_TOKEN = frozenset({"--gpu-name", "-arch", "--opt-level", "--maxrregcount", "-maxrregcount"})


_C_EXACT = frozenset({"-shared", "-fPIC", "-fpic", "-Wno-psabi", "-w", "-g", "-O0", "-O1", "-O2", "-O3", "-Os",
                      "-std=c99", "-std=c11", "-std=gnu99", "-std=gnu11"})
_C_FOLDER = re.compile(r"-[IL](/[A-Za-z0-9_./+-]{0,400})")
_C_LIBRARY = re.compile(r"-l:?[A-Za-z0-9_.+-]{1,80}")
_C_DEFINE = re.compile(r"-D[A-Za-z_][A-Za-z0-9_]{0,60}(=[A-Za-z0-9_.]{0,60})?")


class Refused(Exception):
    """A request the broker does not serve (its reason goes back to the candidate)."""


def normalise_options(options: Any) -> list[str]:
    """The options as ptxas gets them (``--opt-level 3`` joined to ``--opt-level=3``). Raises Refused for anything
    outside the allow-list."""
    if not isinstance(options, list) or len(options) > MAX_OPTIONS or \
            not all(isinstance(o, str) and 0 < len(o) < 100 for o in options):
        raise Refused(f"options must be a list of at most {MAX_OPTIONS} short strings")
    out: list[str] = []
    i = 0
    while i < len(options):
        option = options[i]
        if option in _TWO_TOKEN and i + 1 < len(options):
            option = f"{option}={options[i + 1]}"
            i += 1
        if option not in _EXACT and not any(p.fullmatch(option) for p in _PATTERNS):
            raise Refused(f"ptxas option {option!r} is not among those the evaluator's compile broker allows")
        out.append(option)
        i += 1
    return out


def normalise_c_options(options: Any) -> list[str]:
    """A C compile's options as the candidate named them, where each is one the broker allows (Triton's launcher
    build: ``-O3 -shared -fPIC -Wno-psabi -lcuda -L... -I...``). Raises Refused for anything else: an output, a
    plugin, a spec file, a linker script or a wrapper could make the compiler run or write what the candidate
    chooses."""
    if not isinstance(options, list) or len(options) > 4 * MAX_OPTIONS or \
            not all(isinstance(o, str) and 0 < len(o) < 420 for o in options):
        raise Refused(f"options must be a list of at most {4 * MAX_OPTIONS} short strings")
    for option in options:
        if option in _C_EXACT or (_C_FOLDER.fullmatch(option) and ".." not in option) or \
                _C_LIBRARY.fullmatch(option) or _C_DEFINE.fullmatch(option):
            continue
        raise Refused(f"C compiler option {option[:80]!r} is not among those the evaluator's compile broker allows")
    return list(options)


def _limits(cpu_s: float, memory_bytes: int) -> None:
    """In the compiler's child, before it runs: CPU, address-space and file-size limits, a session of its own
    (killed as a group). Rationale: the C source is the candidate's, and an ``#include "/dev/zero"`` makes a
    preprocessor read without end; the address space stops it long before the host's memory would."""
    os.setsid()
    seconds = int(cpu_s) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (_FILE_LIMIT, _FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _tail(data: bytes) -> str:
    return data[-MAX_LOG:].decode(errors="replace")


class Broker:
    """Serves one candidate: ``tools`` maps a tool's name to the program the judge named for it."""

    def __init__(self, tools: dict[str, str], timeout_s: float = TIMEOUT_S, memory_bytes: int = MEMORY_LIMIT) -> None:
        self.tools = dict(tools)
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self._versions: dict[str, str] = {}

    def _tool(self, msg: dict[str, Any]) -> str:
        path = self.tools.get(str(msg.get("tool")))
        if path is None:
            raise Refused(f"no tool {str(msg.get('tool'))[:40]!r} here (served: {', '.join(sorted(self.tools))})")
        return path

    def _run(self, argv: list[str], cwd: str) -> tuple[int, bytes, bytes]:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin", "TMPDIR": cwd, "HOME": cwd},
                                preexec_fn=lambda: _limits(self.timeout_s, self.memory_bytes))
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
            stopped = f"\n{os.path.basename(argv[0])} ran past {self.timeout_s:.0f} s and was stopped"
            return -signal.SIGKILL, out, err + stopped.encode()
        return proc.returncode, out, err

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One request's reply. Raises Refused."""
        op = msg.get("op")
        tool = self._tool(msg)
        if op == "version":
            if tool not in self._versions:
                work = tempfile.mkdtemp(prefix="broker-")
                try:
                    rc, out, err = self._run([tool, "--version"], work)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                if rc != 0:
                    return {"ok": True, "rc": rc, "stdout": _tail(out), "stderr": _tail(err)}
                self._versions[tool] = _tail(out)
            return {"ok": True, "rc": 0, "stdout": self._versions[tool], "stderr": ""}
        if op == "cc":
            return self._cc(tool, msg)
        if op != "compile":
            raise Refused(f"unknown op {str(op)[:40]!r}")
        if msg.get("tool") == C_TOOL:
            raise Refused("the C compiler takes C (op cc), not PTX")
        options = normalise_options(msg.get("options"))
        ptx = msg.get("ptx")
        if not isinstance(ptx, str) or len(ptx) > MAX_PTX:
            raise Refused(f"the PTX must be text of at most {MAX_PTX} characters")
        return self._build(tool, "kernel.ptx", ptx, [*options, "kernel.ptx", "-o", "kernel.cubin"], "kernel.cubin",
                           "cubin", MAX_CUBIN)

    def _cc(self, tool: str, msg: dict[str, Any]) -> dict[str, Any]:
        """Build one shared library from the C source sent (Triton's launcher for a kernel signature)."""
        if msg.get("tool") != C_TOOL:
            raise Refused(f"op cc runs the C compiler (tool {C_TOOL!r}) only")
        options = normalise_c_options(msg.get("options"))
        source = msg.get("source")
        if not isinstance(source, str) or len(source) > MAX_C_SOURCE:
            raise Refused(f"the C source must be text of at most {MAX_C_SOURCE} characters")
        return self._build(tool, "launcher.c", source, ["launcher.c", *options, "-o", "launcher.so"], "launcher.so",
                           "library", MAX_LIBRARY)

    def _build(self, tool: str, source_name: str, source: str, args: list[str], output: str, key: str,
               most: int) -> dict[str, Any]:
        """Run ``tool args`` in a fresh folder holding ``source`` as ``source_name``; the reply, with the ``output``
        file's bytes (base64) under ``key`` where the tool succeeded. Raises Refused for an output over ``most``
        bytes."""
        work = tempfile.mkdtemp(prefix="broker-")
        try:
            with open(os.path.join(work, source_name), "w") as fh:
                fh.write(source)
            rc, out, err = self._run([tool, *args], work)
            reply: dict[str, Any] = {"ok": True, "rc": rc, "stdout": _tail(out), "stderr": _tail(err)}
            built = os.path.join(work, output)
            if rc == 0 and os.path.isfile(built):
                if os.path.getsize(built) > most:
                    raise Refused(f"the {key} exceeds {most} bytes")
                with open(built, "rb") as fh:
                    reply[key] = base64.b64encode(fh.read()).decode()
            return reply
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def serve(self, sock: socket.socket) -> int:
        """Answer requests until the candidate's end closes (its process ended)."""
        while True:
            try:
                msg, fds = channel.receive(sock)
            except channel.WireError:
                return 0
            for fd in fds:
                os.close(fd)
            try:
                reply = self.handle(msg)
            except Refused as exc:
                reply = {"ok": False, "reason": str(exc)}
            except OSError as exc:
                reply = {"ok": False, "reason": f"the compile broker failed: {exc}"}
            try:
                channel.send(sock, reply)
            except (OSError, channel.WireError):
                return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ca_runner.broker")
    parser.add_argument("--fd", type=int, required=True, help="the broker's end of the socket pair")
    parser.add_argument("--tool", action="append", default=[], help="NAME=PATH of a program to serve")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S)
    args = parser.parse_args(argv)
    tools = dict(t.split("=", 1) for t in args.tool if "=" in t)
    sys.stdin.close()
    return Broker(tools, args.timeout).serve(socket.socket(fileno=args.fd))


if __name__ == "__main__":
    sys.exit(main())
