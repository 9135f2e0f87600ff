"""The two backends of the sandbox package's protocol: `Sandbox` (bubblewrap) and `TrustedLocalShell` (no
confinement) answer ``cuda-agent`` commands through the same broker and apply the same file-verb rules; the local
shell's own duties (a clean environment, the whole process group killed on timeout, capped output)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.sandbox import BrokerReply, Sandbox, TrustedLocalShell
from cuda_agent.workspace import PROTECTED_ROOTS


def _echo(command: str, args: list[str], workspace: Path) -> BrokerReply:
    return BrokerReply(f"{command} for {workspace.name}: {' '.join(args)}", 3)


@pytest.fixture(params=["bwrap", "local"])
def shell(request: pytest.FixtureRequest, plain_workspace: Path):
    if request.param == "bwrap":
        request.getfixturevalue("bwrap_ready")
        made = Sandbox(plain_workspace, protected=PROTECTED_ROOTS, broker=_echo)
    else:
        made = TrustedLocalShell(plain_workspace, protected=PROTECTED_ROOTS, broker=_echo)
    yield made
    made.close()


def test_both_backends_speak_the_same_protocol(shell) -> None:
    build = shell.exec("cuda-agent build --verbose")
    unknown = shell.exec("cuda-agent rm -rf /")
    assert (build.returncode, build.stdout) == (3, "build for episode-0: --verbose\n")
    assert unknown.returncode == 2 and "unknown command" in unknown.stdout


def test_both_backends_apply_the_same_file_rules(shell, plain_workspace: Path, tmp_path: Path) -> None:
    shell.write_file("kernels/new/k.cu", "// k\n")
    assert (plain_workspace / "kernels/new/k.cu").read_text() == "// k\n"
    assert shell.read_file("kernels/new/k.cu") == "// k\n"
    (tmp_path / "secret.txt").write_text("host secret")
    os.symlink(tmp_path / "secret.txt", plain_workspace / "kernels/out.cu")
    with pytest.raises(PermissionError, match="outside"):
        shell.read_file("kernels/out.cu")
    for protected in ("model.py", "include/other.h", ".cuda_agent/manifest.json"):
        with pytest.raises(PermissionError, match="protected"):
            shell.write_file(protected, "pwned")
    with pytest.raises(PermissionError):
        shell.write_file("/etc/passwd", "pwned")
    assert (plain_workspace / "model.py").read_text().startswith("import torch")
    kinds = [v.kind for v in shell.violations]
    assert kinds.count("protected_file") == 3 and "read_outside" in kinds and "write_outside" in kinds


def test_the_local_shell_runs_in_the_workspace_without_the_hosts_secrets(plain_workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    with TrustedLocalShell(plain_workspace, protected=PROTECTED_ROOTS) as shell:
        result = shell.exec("pwd; env; cat model_new.py")
    assert result.returncode == 0 and result.stdout.startswith(f"{plain_workspace.resolve()}\n")
    assert "sk-host-secret" not in result.stdout and "# agent" in result.stdout


def test_the_local_shell_kills_the_whole_command_on_timeout(plain_workspace: Path) -> None:
    with TrustedLocalShell(plain_workspace, protected=PROTECTED_ROOTS) as shell:
        result = shell.exec("echo start; (sleep 30; echo child) & sleep 30; echo never", timeout=1)
    assert result.timed_out and result.returncode == 124
    assert "start" in result.stdout and "never" not in result.stdout and "child" not in result.stdout


def test_the_local_shell_keeps_the_head_and_tail_of_long_output(plain_workspace: Path) -> None:
    from cuda_agent.sandbox import SandboxLimits

    with TrustedLocalShell(plain_workspace, SandboxLimits(max_output_bytes=1000), protected=PROTECTED_ROOTS) as shell:
        result = shell.exec("seq 1 100000")
    assert result.stdout.startswith("1\n2\n") and result.stdout.endswith("99999\n100000\n")
    assert len(result.stdout) <= 1000 and result.truncated_bytes == len("".join(f"{i}\n" for i in
                                                                               range(1, 100001))) - 1000
