"""Child processes that end with the command that started them.

Why: cuda-agent starts workers in their own sessions (GPU pool workers, the evaluator's fork server, bubblewrap
sandboxes) so that each can be killed whole. A new session also means that a terminal's Ctrl-C, a CI cancel's
SIGTERM or a closed SSH session's SIGHUP never reaches them: without help they outlive the command, holding a
GPU at 100%.

How to use it:

- Code that starts a worker in its own process group calls `register_group(pid)` after starting it and
  `unregister_group(pid)` once it has reaped it, and checks `terminating()` before starting a replacement.
- A command that starts workers runs inside `guard()` (the CLI does this for every such subcommand). The guard
  makes this process a child subreaper (orphaned descendants are re-parented to it instead of to init, so they
  stay findable), installs handlers for SIGTERM, SIGINT and SIGHUP, and on leaving, normally or not, kills every
  registered group and every descendant.
- On a signal the handler kills them all and raises `Terminated` (exit status 128 + the signal number), unless
  the command asked for a graceful stop (``on_signal``): then the first signal calls it and the command winds
  down on its own; a second signal kills at once.
- A subreaper must reap what it adopts: a sandbox whose bubblewrap monitor is killed before the process inside
  it leaves that process to the nearest subreaper (one per evaluation). While the guard is installed a reaper
  thread reaps every zombie child that is adopted, that is, in a session other than this process's and not a
  registered group, once it has been a zombie for ORPHAN_GRACE_S (its own parent is gone; nobody else waits).
  So a child started in a session of its own must be registered (`register_group`), or waited for within that
  grace: else its exit status may be taken, and its pid reused under a handle that still names it.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import threading
import time
from typing import Callable, Iterator

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_SET_CHILD_SUBREAPER = 36
_REAP_WAIT_S = 5.0
ORPHAN_SWEEP_S = 1.0
ORPHAN_GRACE_S = 5.0


class Terminated(SystemExit):
    """Raised in the main thread when a signal ends the command; the exit status is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: set[int] = set()
        self.adopted: set[int] = set()
        self.terminating = threading.Event()
        self.graceful: Callable[[int], None] | None = None
        self.signalled = 0
        self.previous: dict[int, object] = {}
        self.reaper: threading.Thread | None = None
        self.reaper_stop = threading.Event()


_STATE = _State()


def _stats() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, session, ...) for every
    process this one can see."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                after = fh.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if len(after) > 3:
            yield int(entry.name), after


def descendants(root_pid: int) -> list[int]:
    """Host pids of every process below ``root_pid``, parents before children (read from /proc/*/stat; works
    across sessions and PID namespaces)."""
    children: dict[int, list[int]] = {}
    for pid, fields in _stats():
        children.setdefault(int(fields[1]), []).append(pid)
    found: list[int] = []
    stack = [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_tree(pid: int) -> int:
    """SIGKILL ``pid`` and every process below it, deepest first; return how many were signalled.

    The ones below ``pid`` lose their parent with it, so a subreaper adopts them: they are remembered and reaped
    (by pid, never with ``waitpid(-1)``, which would take the exit status a `subprocess.Popen` waits for), so that
    a long-running command does not pile up zombies."""
    doomed = [pid, *descendants(pid)]
    count = sum(_kill(victim) for victim in reversed(doomed))
    with _STATE.lock:
        _STATE.adopted.update(doomed[1:])
    reap_adopted()
    return count


def reap_adopted() -> None:
    """Reap the killed descendants this process adopted (see `kill_tree`); forget those that are gone."""
    with _STATE.lock:
        candidates = list(_STATE.adopted)
    for pid in candidates:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid if not os.path.exists(f"/proc/{pid}") else 0
        if done:
            with _STATE.lock:
                _STATE.adopted.discard(pid)


def _children() -> list[int] | None:
    """This process's children, from each thread's /proc children list (None where the kernel keeps no such list:
    then the caller reads every process's stat)."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        return None
    found: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as fh:
                found.extend(int(pid) for pid in fh.read().split())
        except OSError:
            continue  # a thread that has just ended
    return found


def _stat_of(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None


def adopted_zombies() -> set[int]:
    """This process's zombie children that it did not start: in a session other than its own and not a
    registered group (every child this package starts in a session of its own is registered). Cheap when there
    is no zombie child at all (one ``waitid`` that reaps nothing), which is nearly always."""
    try:
        if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return set()
    except ChildProcessError:
        return set()
    me = str(os.getpid()).encode()
    session = str(os.getsid(0)).encode()
    with _STATE.lock:
        groups = set(_STATE.groups)
    children = _children()
    stats = ((pid, _stat_of(pid)) for pid in children) if children is not None else _stats()
    return {pid for pid, fields in stats
            if fields is not None and len(fields) > 3 and fields[0] == b"Z" and fields[1] == me
            and fields[3] != session and pid not in groups}


def reap_orphans(suspects: dict[int, float], grace_s: float = ORPHAN_GRACE_S) -> dict[int, float]:
    """One sweep of the reaper: reap the adopted zombies that have been zombies for ``grace_s`` (``suspects``:
    when each was first seen); return the ones left, with the new ones. The grace leaves a child that code of this
    process started in a session of its own without registering it to its owner, who waits for it promptly."""
    now = time.monotonic()
    zombies = adopted_zombies()
    left = {pid: suspects.get(pid, now) for pid in zombies}
    for pid, since in list(left.items()):
        if now - since >= grace_s:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            del left[pid]
    reap_adopted()
    return left


def _reap_orphans_forever(stop: threading.Event) -> None:
    suspects: dict[int, float] = {}
    while not stop.wait(ORPHAN_SWEEP_S):
        try:
            suspects = reap_orphans(suspects)
        except OSError:
            log.debug("the orphan sweep failed; trying again", exc_info=True)


def _start_reaper() -> None:
    if _STATE.reaper is not None and _STATE.reaper.is_alive():
        return
    _STATE.reaper_stop = threading.Event()
    _STATE.reaper = threading.Thread(target=_reap_orphans_forever, args=(_STATE.reaper_stop,),
                                     name="cuda-agent-reaper", daemon=True)
    _STATE.reaper.start()


def _stop_reaper() -> None:
    _STATE.reaper_stop.set()
    if _STATE.reaper is not None:
        _STATE.reaper.join(timeout=5)
    _STATE.reaper = None


def kill_group(pgid: int) -> int:
    """SIGKILL the tree below a group's leader (children that started sessions of their own included), then the
    whole group (members whose parent already died); return how many processes were signalled."""
    count = kill_tree(pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return count


def register_group(pgid: int) -> None:
    """Record a child's process group (its pid, for a child started with ``start_new_session=True``) so that
    `kill_all` ends it. If the command is already ending, the group is killed at once."""
    with _STATE.lock:
        _STATE.groups.add(pgid)
    if _STATE.terminating.is_set():
        kill_group(pgid)
    reap_adopted()


def unregister_group(pgid: int) -> None:
    """Forget a group whose leader has been reaped (its pid may be reused)."""
    with _STATE.lock:
        _STATE.groups.discard(pgid)


def terminating() -> bool:
    """True once a signal is ending the command: start no new worker."""
    return _STATE.terminating.is_set()


def kill_all(*, include_descendants: bool = True) -> int:
    """Kill every registered group and (by default) every descendant of this process; return how many processes
    were signalled."""
    with _STATE.lock:
        groups = list(_STATE.groups)
    count = sum(kill_group(pgid) for pgid in groups)
    if include_descendants:
        count += sum(_kill(pid) for pid in reversed(descendants(os.getpid())))
    return count


def _reap(deadline_s: float) -> None:
    """Wait until no descendant is left alive (zombies of ours are reaped), for at most ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
        alive = [p for p in descendants(os.getpid()) if not _is_zombie(p)]
        if not alive or time.monotonic() > end:
            if alive:
                log.error("processes %s did not die after SIGKILL", alive)
            return
        for pid in alive:
            _kill(pid)
        time.sleep(0.02)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def _set_subreaper(on: bool) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    except (OSError, AttributeError):
        log.debug("cannot set the child subreaper flag; orphaned workers may escape the process tree walk")


def _handle(signum: int, _frame: object) -> None:
    _STATE.signalled += 1
    graceful = _STATE.graceful
    if graceful is not None and _STATE.signalled == 1:
        log.warning("received %s: stopping (send it again to kill every worker now)", signal.Signals(signum).name)
        graceful(signum)
        return
    _STATE.terminating.set()
    killed = kill_all()
    log.warning("received %s: killed %d worker process(es)", signal.Signals(signum).name, killed)
    raise Terminated(signum)


def install(on_signal: Callable[[int], None] | None = None) -> None:
    """Install the handlers (main thread only) and become a child subreaper. ``on_signal(signum)``, if given,
    is called on the first signal instead of killing: it must return quickly (start the stop, do not wait)."""
    _STATE.graceful = on_signal
    _STATE.signalled = 0
    _STATE.terminating.clear()
    _set_subreaper(True)
    _start_reaper()
    for signum in SIGNALS:
        previous = signal.signal(signum, _handle)
        _STATE.previous.setdefault(signum, previous)


def set_graceful(on_signal: Callable[[int], None] | None) -> None:
    """Change what the first signal does (see `install`)."""
    _STATE.graceful = on_signal


def shutdown() -> None:
    """Kill whatever is left of the command's processes, reap them, and restore the previous handlers."""
    _STATE.terminating.set()
    _stop_reaper()
    kill_all()
    _reap(_REAP_WAIT_S)
    for signum, previous in _STATE.previous.items():
        signal.signal(signum, previous)  # type: ignore[arg-type]
    _STATE.previous.clear()
    _STATE.graceful = None
    _STATE.terminating.clear()
    _set_subreaper(False)


@contextlib.contextmanager
def guard(on_signal: Callable[[int], None] | None = None) -> Iterator[None]:
    """`install` on entry, `shutdown` on exit: no process started inside outlives the block."""
    install(on_signal)
    try:
        yield
    finally:
        shutdown()
