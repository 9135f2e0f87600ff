"""`cuda_agent.procs`: a command that starts workers (a pool's, one in its own session that ignores SIGTERM, a
daemon whose parent already exited) leaves none of them behind, whether it ends by SIGTERM, SIGINT, SIGHUP or
normally."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fault_probes.server import alive
from cuda_agent.procs import descendants

SRC = str(Path(__file__).resolve().parents[1] / "src")

SCRIPT = r"""
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from cuda_agent import procs
from cuda_agent.pool import LocalPool, StandInEvaluator

with procs.guard():
    pool = LocalPool(gpus=["0", "1"], evaluator=StandInEvaluator(seconds=0.01))
    pool.wait_ready()
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                                start_new_session=True)
    procs.register_group(stubborn.pid)
    subprocess.run([sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    os.setsid(); time.sleep(600)"])
    print("ready", flush=True)
    if sys.argv[2] == "wait":
        time.sleep(600)
print("left the block", flush=True)
"""


def _start(mode: str) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, SRC, mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    return proc, descendants(proc.pid)


def _none_alive(pids: list[int], within_s: float = 5.0) -> list[int]:
    end = time.monotonic() + within_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_ends_every_worker(sig: signal.Signals) -> None:
    proc, workers = _start("wait")
    assert len(workers) >= 4, f"expected two pool workers, a stubborn child and a daemon, found {workers}"
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == 128 + sig
    assert _none_alive(workers) == []


def test_leaving_the_guard_ends_every_worker() -> None:
    proc, workers = _start("leave")
    assert proc.wait(timeout=30) == 0
    assert proc.stdout is not None and "left the block" in proc.stdout.read()
    assert _none_alive(workers) == []


ADOPTION = r"""
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from cuda_agent import procs

procs.install()
zombies = []
for _ in range(5):
    worker = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
                               "time.sleep(600)"], start_new_session=True)
    procs.register_group(worker.pid)
    time.sleep(0.5)
    procs.kill_group(worker.pid)
    worker.wait()
    procs.unregister_group(worker.pid)
    time.sleep(0.2)
    procs.reap_adopted()
def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[1]
    except OSError:  # ended meanwhile
        return None
mine = [int(e) for e in os.listdir("/proc") if e.isdigit() and parent(e) == str(os.getpid())]
print(len(mine), flush=True)
"""


def test_killed_workers_leave_no_zombies_in_a_long_running_command() -> None:
    """A subreaper adopts the children of a killed worker; they are reaped, not left as zombies to pile up."""
    done = subprocess.run([sys.executable, "-c", ADOPTION, SRC], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", f"children (zombies) left: {done.stdout}"


REAPER = r"""
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from cuda_agent import procs

procs.install()
own = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)  # not registered
subprocess.run([sys.executable, "-c", "import os, time\nif os.fork() == 0:\n    os.setsid(); time.sleep(0.2)"])
time.sleep(procs.ORPHAN_SWEEP_S * 2.5)  # sweeps ran, but within the grace an owner's child stays its owner's
print(own.wait(), flush=True)
time.sleep(procs.ORPHAN_GRACE_S + procs.ORPHAN_SWEEP_S * 3)
def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[1]
    except OSError:  # ended meanwhile
        return None
mine = [int(e) for e in os.listdir("/proc") if e.isdigit() and parent(e) == str(os.getpid())]
print(len(mine), flush=True)
procs.shutdown()
"""


def test_the_reaper_takes_adopted_zombies_and_leaves_an_owners_child_alone() -> None:
    """A daemon whose parent exited is adopted and, once dead, reaped by the reaper thread with no call from the
    command; a child the command started itself keeps its exit status for its own `wait`."""
    done = subprocess.run([sys.executable, "-c", REAPER, SRC], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "0"], done.stdout
