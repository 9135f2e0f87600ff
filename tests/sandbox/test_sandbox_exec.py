"""The three verbs and the limits, against real bubblewrap."""
from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from cuda_agent.sandbox import Sandbox, SandboxLimits
from cuda_agent.workspace import PROTECTED_ROOTS


def test_exec_runs_in_workspace_as_unprivileged_user(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("pwd; id -u; grep CapEff /proc/self/status; echo out; echo err >&2; exit 3")
    lines = r.stdout.splitlines()
    assert lines[0] == "/workspace"
    assert int(lines[1]) != 0
    assert lines[2].split()[1] == "0000000000000000"
    assert lines[3] == "out" and r.stderr.strip() == "err" and r.returncode == 3 and not r.success


def test_files_written_inside_appear_in_workspace(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("mkdir -p kernels/sub && echo '__global__ void k(){}' > kernels/sub/a.cu && cat model.py")
        assert r.returncode == 0, r.stderr
        assert "class Model" in r.stdout
        assert (workspace / "kernels/sub/a.cu").read_text() == "__global__ void k(){}\n"
        assert sb.exec("cat kernels/sub/a.cu", cwd="kernels").returncode != 0
        assert sb.exec("cat sub/a.cu", cwd="kernels").stdout.startswith("__global__")


def test_host_environment_does_not_leak(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = secrets.token_hex(8)
    monkeypatch.setenv("CUDA_AGENT_TEST_SECRET", token)
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("env; cat /proc/1/environ 2>/dev/null; hostname")
    assert token not in r.stdout
    assert "sandbox" in r.stdout


def test_python_and_nvcc_toolchains_visible(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("python -c 'import sys, json; print(json.dumps(sys.version_info[:2]))' && command -v nvcc")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("[3,")


def test_wall_time_kills_whole_process_tree(workspace: Path, processes_with) -> None:
    marker = f"cuda_agent_marker_{secrets.token_hex(4)}"
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=SandboxLimits(timeout_s=30)) as sb:
        started = time.monotonic()
        r = sb.exec(f"(exec -a {marker} sleep 60) & (setsid bash -c 'exec -a {marker} sleep 60') & sleep 60",
                    timeout=1.5)
        elapsed = time.monotonic() - started
    assert r.timed_out and r.returncode == 124
    assert elapsed < 10
    assert "wall-time limit" in r.stderr
    assert processes_with(marker) == []


def test_background_processes_end_with_the_command(workspace: Path, processes_with) -> None:
    marker = f"cuda_agent_marker_{secrets.token_hex(4)}"
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec(f"nohup bash -c 'exec -a {marker} sleep 60' >/dev/null 2>&1 & echo started")
        assert r.stdout.strip() == "started"
        time.sleep(0.3)
        assert processes_with(marker) == []


def test_output_trimmed_with_note(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=SandboxLimits(max_output_bytes=1000)) as sb:
        r = sb.exec("seq 1 100000")
    assert r.stdout.startswith("1\n2\n3\n")
    assert r.stdout.rstrip().endswith("100000")
    assert "bytes of output omitted" in r.stdout
    assert r.truncated_bytes > 500_000 and len(r.stdout) < 1500


def test_memory_limit(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=SandboxLimits(memory_bytes=512 << 20)) as sb:
        r = sb.exec("python -c 'x = bytearray(2 << 30); print(len(x))'")
    assert r.returncode != 0 and "MemoryError" in r.stderr


def test_cpu_time_limit(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, limits=SandboxLimits(cpu_seconds=1, timeout_s=30)) as sb:
        started = time.monotonic()
        r = sb.exec("python -c 'while True: pass'")
    assert r.returncode in (128 + 9, 128 + 24) and not r.timed_out
    assert time.monotonic() - started < 20


def test_stdin_input(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        assert sb.exec("tr a-z A-Z", input="hello").stdout == "HELLO"


def test_private_tmp_is_not_shared(workspace: Path) -> None:
    name = f"cuda-agent-test-{secrets.token_hex(4)}"
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        assert sb.exec(f"echo x > /tmp/{name} && cat /tmp/{name}").stdout == "x\n"
        assert sb.exec(f"ls /tmp/{name}").returncode != 0
    assert not Path("/tmp", name).exists()


def test_read_and_write_file(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        sb.write_file("kernels/relu.cu", "// relu\n")
        sb.write_file("/workspace/model_new.py", "print('new')\n")
        assert (workspace / "kernels/relu.cu").read_text() == "// relu\n"
        assert sb.read_file("model_new.py") == "print('new')\n"
        assert sb.exec("cat kernels/relu.cu && echo more >> kernels/relu.cu").returncode == 0
        assert sb.read_file("/workspace/kernels/relu.cu") == "// relu\nmore\n"
        with pytest.raises(FileNotFoundError):
            sb.read_file("kernels/missing.cu")
        with pytest.raises(IsADirectoryError):
            sb.read_file("kernels")


def test_read_write_file_refuse_outside_and_protected(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        with pytest.raises(PermissionError):
            sb.read_file("/etc/hostname")
        with pytest.raises(PermissionError):
            sb.read_file("../episode-0/../../x")
        os.symlink("/etc/hostname", workspace / "kernels/link.txt")
        with pytest.raises(PermissionError):
            sb.read_file("kernels/link.txt")
        with pytest.raises(PermissionError):
            sb.write_file("model.py", "hacked")
        with pytest.raises(PermissionError):
            sb.write_file("include/extra.h", "x")
        kinds = [v.kind for v in sb.violations]
    assert (workspace / "model.py").read_text().startswith("import torch")
    assert not (workspace / "include/extra.h").exists()
    assert kinds.count("read_outside") == 3 and kinds.count("protected_file") == 2


def test_userns_identity_also_works(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, identity="userns") as sb:
        r = sb.exec("id -u; echo hi > kernels/x.cu; echo no > model.py")
    assert r.stdout.splitlines()[0] == "65534"
    assert (workspace / "kernels/x.cu").read_text() == "hi\n"
    assert (workspace / "model.py").read_text().startswith("import torch")


def test_closed_sandbox_refuses(workspace: Path) -> None:
    from cuda_agent.errors import SandboxError

    sb = Sandbox(workspace, protected=PROTECTED_ROOTS)
    sb.close()
    sb.close()
    with pytest.raises(SandboxError, match="closed"):
        sb.exec("true")


def test_missing_workspace_is_a_clear_error(tmp_path: Path, bwrap_ready: None) -> None:
    from cuda_agent.errors import SandboxError

    with pytest.raises(SandboxError, match="not a folder"):
        Sandbox(tmp_path / "nope", protected=PROTECTED_ROOTS)


def test_missing_bwrap_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent.errors import SandboxError
    from cuda_agent.sandbox import _probe

    monkeypatch.setattr(_probe.shutil, "which", lambda name: None)
    monkeypatch.setattr(_probe.os.path, "exists", lambda p: False)
    with pytest.raises(SandboxError, match="apt-get install -y bubblewrap"):
        _probe.bwrap_path()
    assert os.path.exists  # the real function is restored by monkeypatch


def test_files_the_host_writes_stay_editable_inside(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        (workspace / "kernels" / "host_made.cu").write_text("// from an edit tool on the host\n")
        r = sb.exec("echo '// appended inside' >> kernels/host_made.cu && cat kernels/host_made.cu")
    assert r.returncode == 0, r.stderr
    assert (workspace / "kernels/host_made.cu").read_text().endswith("// appended inside\n")


def test_many_sandboxes_share_one_inotify_instance(workspace: Path) -> None:
    boxes = [Sandbox(workspace, protected=PROTECTED_ROOTS) for _ in range(3)]
    try:
        results = [b.exec("cat /etc/shadow >/dev/null") for b in boxes[:2]]
        quiet = boxes[2].exec("true")
    finally:
        for b in boxes:
            b.close()
    assert all(any(v.evidence == "effect" for v in r.violations) for r in results)
    assert quiet.violations == ()


def test_concurrent_sandboxes_stay_apart(workspace: Path, tmp_path: Path) -> None:
    import shutil
    import threading

    spaces = [workspace] + [shutil.copytree(workspace, tmp_path / f"episode-{i}") for i in range(2, 5)]
    boxes = [Sandbox(ws, protected=PROTECTED_ROOTS) for ws in spaces]
    results: dict[int, object] = {}

    def work(i: int) -> None:
        cmd = f"echo {i} > kernels/me.txt; ls /tmp; touch /tmp/mine-{i}; " + ("cat /etc/shadow" if i % 2 else "true")
        results[i] = boxes[i].exec(cmd)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(boxes))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        uids = {b.uid for b in boxes}
    finally:
        for b in boxes:
            b.close()
    for i, ws in enumerate(spaces):
        r = results[i]
        assert (ws / "kernels/me.txt").read_text() == f"{i}\n"
        assert "mine-" not in r.stdout
        assert bool(r.violations) == bool(i % 2)
    assert len(uids) == len(boxes) or boxes[0].identity == "userns"
