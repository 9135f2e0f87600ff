"""The task-code sandbox (`cuda_agent.sandbox.task_code`): no host secret, file or network inside, the package
read-only, and a candidate's sandbox nests in it, as root and as a normal user."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from cuda_agent.sandbox import sandbox_available
from cuda_agent.sandbox.task_code import PACKAGE_MOUNT, TaskCodeSpec, nesting_problem, spawn_task_code

pytestmark = pytest.mark.skipif(not sandbox_available("userns"), reason="bubblewrap cannot run here")

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(script: str, spec: TaskCodeSpec | None = None) -> str:
    proc = spawn_task_code(spec or TaskCodeSpec(), ["/bin/sh", "-c", script], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    out, _ = proc.communicate(timeout=120)
    return out.decode(errors="replace")


def test_inside_there_is_no_host_secret_file_or_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "canary-key-4b1d")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("canary-ssh-77e0")
    monkeypatch.setenv("HOME", str(home))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    out = _run(f"env; cat {home}/.ssh/id_rsa /etc/shadow; ls /home {os.getcwd()}; "
               f"echo x > {PACKAGE_MOUNT}/cuda_agent/written && echo WROTE-PACKAGE; "
               f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2)' "
               "&& echo CONNECTED; echo done")
    listener.close()
    assert "done" in out
    assert "canary-key-4b1d" not in out and "canary-ssh-77e0" not in out
    assert "WROTE-PACKAGE" not in out and "CONNECTED" not in out
    assert "HOME=/tmp" in out and "CUDA_AGENT_IN_TASK_SANDBOX=1" in out


def test_only_the_named_folders_are_writable(tmp_path: Path) -> None:
    job, cache = tmp_path / "job", tmp_path / "cache"
    job.mkdir()
    cache.mkdir()
    _run(f"echo a > {job}/ok; echo b > {cache}/bad", TaskCodeSpec(rw=[str(job)], ro=[str(cache)]))
    assert (job / "ok").read_text() == "a\n"
    assert not (cache / "bad").exists()


def test_a_sandbox_nests_inside_as_this_user() -> None:
    assert nesting_problem() == ""
    out = _run("bwrap --unshare-all --unshare-user --disable-userns --uid 65534 --gid 65534 --ro-bind /usr /usr "
               "--symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev -- "
               "/bin/sh -c 'echo nested; ls /proc | head -1'")
    assert "nested" in out, out


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"), reason="needs root to try another user")
def test_a_sandbox_nests_inside_as_a_normal_user() -> None:
    done = subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "env", "-i",
                           "PATH=/usr/bin:/bin", f"PYTHONPATH={SRC}", "HOME=/tmp", "/usr/bin/python3", "-c",
                           "from cuda_agent.sandbox.task_code import nesting_problem; print(repr(nesting_problem()))"],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "''", done.stdout + done.stderr
