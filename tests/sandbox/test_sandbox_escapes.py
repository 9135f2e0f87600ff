"""Escape attempts, each tried for real: each must fail (the host is unchanged, nothing secret comes back) and be
recorded as a violation. Several would pass only by luck if the matching protection were removed."""
from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cuda_agent
from cuda_agent.sandbox import Sandbox, SandboxLimits
from cuda_agent.workspace import PROTECTED_ROOTS

from_kinds = lambda result: {v.kind for v in result.violations}  # noqa: E731


def test_read_etc_shadow_sees_only_a_decoy(workspace: Path) -> None:
    host_shadow = Path("/etc/shadow").read_text() if Path("/etc/shadow").exists() else ""
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        plain = sb.exec("cat /etc/shadow")
        sneaky = sb.exec("f=/e; f=${f}tc/sh; cat ${f}a*ow > kernels/stolen.txt")
    assert "decoy" in plain.stdout
    first = host_shadow.splitlines()[0] if host_shadow else "root:"
    assert first not in plain.stdout
    assert first not in (workspace / "kernels/stolen.txt").read_text()
    assert any(v.kind == "read_outside" and v.evidence == "effect" for v in plain.violations)
    assert any(v.kind == "read_outside" and v.evidence == "effect" for v in sneaky.violations)


def test_read_another_episodes_workspace(workspace: Path, sibling: Path) -> None:
    secret = (sibling / "secret.txt").read_text().strip()
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec(f"cat {sibling}/secret.txt; ls -la {sibling.parent}; cat ../episode-1/secret.txt; "
                    "find /tmp /workspace /run /opt /home /mnt /srv /root -name secret.txt 2>/dev/null")
    assert secret not in r.stdout + r.stderr
    assert "read_outside" in from_kinds(r)
    assert any(v.evidence == "effect" for v in r.violations)


def test_read_host_checkout_and_home(workspace: Path) -> None:
    repo = Path(cuda_agent.__file__).resolve().parents[2]
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec(f"cat {repo}/pyproject.toml; ls -A /home /root/.ssh; cat /work/helper_rules.md; "
                    f"python -c 'import cuda_agent' && echo IMPORTED")
    assert "[project]" not in r.stdout
    assert "IMPORTED" not in r.stdout
    assert "read_outside" in from_kinds(r)


def test_network_is_unreachable(workspace: Path) -> None:
    code = ("import socket\n"
            "for fam, addr in ((socket.AF_INET, ('1.1.1.1', 80)), (socket.AF_INET6, ('2606:4700::1111', 80))):\n"
            "    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)\n"
            "    try: s.connect(addr); print('CONNECTED')\n"
            "    except OSError as e: print('failed', e.errno)\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try: u.sendto(b'x', ('8.8.8.8', 53)); print('SENT')\n"
            "except OSError as e: print('failed', e.errno)\n")
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        sb.write_file("net.py", code)
        r = sb.exec("python net.py; cat /proc/net/dev")
    assert "CONNECTED" not in r.stdout and "SENT" not in r.stdout
    interfaces = [line.split(":")[0].strip() for line in r.stdout.splitlines() if ":" in line and "|" not in line]
    assert interfaces == ["lo"]
    network = [v for v in r.violations if v.kind == "network" and v.evidence == "effect"]
    assert network and network[0].detail.startswith("3 ")


def test_fork_bomb_is_contained(workspace: Path, processes_with) -> None:
    marker = f"cuda_agent_bomb_{secrets.token_hex(4)}"
    limits = SandboxLimits(max_processes=32, timeout_s=4)
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=limits) as sb:
        shell = sb.exec(f"exec -a {marker} bash -c ':(){{ :|:& }};:; sleep 10'")
        py = sb.exec("python -c \"import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\"")
    for r in (shell, py):
        assert "fork_bomb" in from_kinds(r)
        assert r.peak_processes <= 32 + 2
    assert any(v.evidence == "effect" for v in py.violations if v.kind == "fork_bomb")
    time.sleep(0.3)
    assert processes_with(marker) == []
    assert subprocess.run(["true"]).returncode == 0


def test_filling_the_disk_is_stopped(workspace: Path) -> None:
    quota = 16 << 20
    limits = SandboxLimits(disk_quota_bytes=quota, tmp_bytes=8 << 20, timeout_s=60)
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=limits) as sb:
        r = sb.exec("for i in $(seq 1 200); do head -c 1048576 /dev/zero > kernels/f$i; sleep 0.02; done")
        used = sum(p.stat().st_size for p in (workspace / "kernels").iterdir())
        tmp = sb.exec("head -c 100000000 /dev/zero > /tmp/big; ls -la /tmp/big")
        cleanup = sb.exec("rm kernels/f*; echo cleaned")
    assert r.killed_reason == "disk_quota" and r.returncode == 137
    assert "disk_quota" in from_kinds(r)
    assert quota // 2 < used < quota + (32 << 20)
    assert "No space left on device" in tmp.stderr
    assert cleanup.stdout.strip() == "cleaned" and not cleanup.violations


def test_file_size_limit(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=SandboxLimits(max_file_bytes=4 << 20)) as sb:
        r = sb.exec("head -c 50000000 /dev/zero > kernels/big.bin")
    assert (workspace / "kernels/big.bin").stat().st_size <= 4 << 20
    assert "file_size" in from_kinds(r)


def test_protected_files_cannot_be_changed(workspace: Path) -> None:
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    attempts = ("echo hacked > model.py; rm -f SKILL.md; mv binding.py b.py; echo x > include/cuda_agent.h; "
                "touch include/extra.h; rm -rf .cuda_agent; chmod 777 model.py; ln -sf /dev/null binding.py; "
                "python -c \"open('model.py', 'w').write('x')\"")
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec(attempts)
    for path, content in before.items():
        if path.parent.name != "kernels" and path.name != "model_new.py":
            assert path.read_bytes() == content, f"{path} changed"
    assert not (workspace / "include/extra.h").exists()
    assert not (workspace / "b.py").exists()
    assert "protected_file" in from_kinds(r)
    restored = [v for v in r.violations if v.kind == "protected_file" and v.evidence == "effect"]
    assert restored == [], "a protected file was changed (and restored from the copy): the read-only bind failed"


def test_changed_protected_file_is_detected_and_restored(workspace: Path) -> None:
    # userns: the sandbox's host uid owns model.py, so only the read-only bind (removed below) protects it
    with Sandbox(workspace, protected=("model.py",), identity="userns") as sb:
        (workspace / "SKILL.md").write_text("changed by the host\n")
        ok = sb.exec("true")
        sb._layout.protected = ()  # simulate a broken bind: the check after the command must catch the change
        r = sb.exec("echo hacked > model.py")
    assert not ok.violations
    assert any(v.kind == "protected_file" and v.evidence == "effect" for v in r.violations)
    assert (workspace / "model.py").read_text().startswith("import torch")


def test_processes_outside_cannot_be_killed(workspace: Path) -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
            r = sb.exec(f"kill -9 {victim.pid}; kill -9 -1; python -c 'import os; os.kill({victim.pid}, 9)'; "
                        "ps -e | wc -l")
        time.sleep(0.2)
        assert victim.poll() is None
        assert "kill_outside" in from_kinds(r)
    finally:
        victim.kill()
        victim.wait()


def test_writes_outside_fail(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / f"pwned-{secrets.token_hex(4)}"
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec(f"touch /usr/pwned; echo x > /etc/passwd; mkdir /pwned; touch {target}; touch /proc/sys/x; "
                    "echo 3 > /proc/sys/vm/drop_caches")
    assert not Path("/usr/pwned").exists() and not Path("/pwned").exists() and not target.exists()
    assert "root:x:0:0" in Path("/etc/passwd").read_text()
    assert "write_outside" in from_kinds(r)


def test_killing_the_monitor_is_recorded(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        direct = sb.exec("kill -9 $$")
        everyone = sb.exec("kill -9 -1")
    assert "monitor" in from_kinds(direct) and "monitor" in from_kinds(everyone)


PTRACE_PROBE = r"""
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
for entry in sorted(os.listdir("/proc"), key=lambda e: (len(e), e)):
    if not entry.isdigit():
        continue
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except OSError:
        continue
    if not cmdline.startswith(b"/opt/cuda-agent/monitor/bash\0"):
        continue
    pid = int(entry)
    rc = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    err = ctypes.get_errno()
    if rc == 0:
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
        os.kill(pid, 18)  # SIGCONT: leave it running if the attach stopped it
    try:
        os.open(f"/proc/{pid}/mem", os.O_RDWR)
        mem = "opened"
    except OSError as exc:
        mem = errno.errorcode[exc.errno]
    print(f"target {pid} attach={rc} errno={errno.errorcode.get(err, err)} mem={mem}")
"""


@pytest.mark.parametrize("identity", ["auto", "userns"])
def test_the_monitor_shell_cannot_be_traced(workspace: Path, identity: str) -> None:
    """Rationale: the shell that runs the command and writes the report runs as the command's user; a command that
    could ptrace it (or write /proc/PID/mem) could forge the report or stop it. It is started from an
    execute-only binary, so the kernel marks it not dumpable and refuses both."""
    (workspace / "probe.py").write_text(PTRACE_PROBE)
    with Sandbox(workspace, protected=PROTECTED_ROOTS, identity=identity, limits=SandboxLimits(timeout_s=30)) as sb:
        r = sb.exec("python3 probe.py; echo done")
    targets = [line for line in r.stdout.splitlines() if line.startswith("target ")]
    assert not r.timed_out and r.stdout.rstrip().endswith("done"), r.stdout + r.stderr
    assert targets, f"the probe found no monitor process: {r.stdout} {r.stderr}"
    for line in targets:
        assert "attach=-1 errno=EPERM" in line and "mem=EACCES" in line, line
    assert "monitor" not in from_kinds(r)


def test_violations_are_logged(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "sandbox.jsonl"
    with Sandbox(workspace, protected=PROTECTED_ROOTS, log_path=log) as sb:
        sb.exec("cat /etc/shadow")
        sb.exec("echo ok")
        total = len(sb.violations)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == total >= 1
    assert records[0]["kind"] == "read_outside" and "cat /etc/shadow" in records[0]["command"]


def test_ordinary_mistakes_are_not_violations(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("cat kernels/missing.cu; ls /workspace/nothing; python -c 'import nonexistent_mod'; "
                    "nvcc --version >/dev/null; echo 'int main(){}' > /tmp/a.c; cat model.py >/dev/null")
    assert r.violations == ()
    assert sb.violations == ()


@pytest.mark.parametrize("command", ["mount -t tmpfs none /workspace", "unshare -r true", "chroot / true"])
def test_privileged_operations_fail(workspace: Path, command: str) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        assert sb.exec(command).returncode != 0


def test_links_out_of_the_workspace_and_fifos_are_removed(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("ln -s /etc/shadow kernels/evil.cu; ln -s ../../../../../root kernels/up; mkfifo kernels/f.cu; "
                    "ln -s /usr/local/cuda/include kernels/cuda_inc; ln -s model_new.py kernels/mine.py; "
                    "ln -s ../model.py kernels/ref.py; ln -s /workspace/model.py abs.py; ln -s /tmp/x kernels/t")
    kernels = workspace / "kernels"
    assert not (kernels / "evil.cu").is_symlink() and not (kernels / "up").is_symlink()
    assert not (kernels / "f.cu").exists()
    assert (kernels / "cuda_inc").is_symlink() and (kernels / "mine.py").is_symlink()
    assert (kernels / "ref.py").is_symlink()
    removed = sorted(v.detail.split(":")[0] for v in r.violations if v.kind == "unsafe_file")
    assert removed == ["abs.py", "kernels/evil.cu", "kernels/f.cu", "kernels/t", "kernels/up"]


def test_workspace_directly_in_tmp_gives_no_false_alarms(bwrap_ready: None) -> None:
    import shutil
    import tempfile

    ws = Path(tempfile.mkdtemp(prefix="cuda-agent-test-ws-"))
    try:
        with Sandbox(ws, protected=PROTECTED_ROOTS) as sb:
            r = sb.exec("echo hi > /tmp/x && cat /tmp/x && ls /tmp /usr/bin/python3 && cd /tmp && pwd")
        assert r.returncode == 0, r.stderr
        assert r.violations == ()
    finally:
        shutil.rmtree(ws, ignore_errors=True)
