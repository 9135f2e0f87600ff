"""`cuda-agent build|verify|profile|submit` typed inside the sandbox reach the host handler through the broker."""
from __future__ import annotations

import shutil
import threading
from pathlib import Path

from cuda_agent.sandbox import Broker, BrokerReply, Sandbox
from cuda_agent.workspace import PROTECTED_ROOTS


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], Path]] = []
        self.lock = threading.Lock()

    def __call__(self, command: str, args: list[str], workspace: Path) -> BrokerReply:
        with self.lock:
            self.calls.append((command, args, workspace))
        if command == "verify":
            raise RuntimeError("GPU pool unavailable")
        return BrokerReply(f"{command} ok: {' '.join(args)}", 0 if command == "build" else 4)


def test_commands_reach_the_handler_with_their_workspace(workspace: Path) -> None:
    handler = Recorder()
    with Broker(handler) as broker, Sandbox(workspace, protected=PROTECTED_ROOTS, broker=broker) as sb:
        build = sb.exec("cuda-agent build --verbose 'two words'")
        profile = sb.exec("cd kernels && cuda-agent profile")
        verify = sb.exec("cuda-agent verify")
        unknown = sb.exec("cuda-agent rm -rf /")
        usage = sb.exec("cuda-agent --help")
    assert build.returncode == 0 and build.stdout == "build ok: --verbose two words\n"
    assert profile.returncode == 4 and profile.stdout.startswith("profile ok")
    assert verify.returncode == 70 and "GPU pool unavailable" in verify.stdout
    assert unknown.returncode == 2 and "unknown command" in unknown.stdout
    assert usage.returncode == 0 and "verify" in usage.stdout
    assert [c[0] for c in handler.calls] == ["build", "profile", "verify"]
    assert handler.calls[0][1] == ["--verbose", "two words"]
    assert all(c[2] == workspace.resolve() for c in handler.calls)


def test_each_sandbox_is_identified_by_its_own_socket(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "episode-9"
    shutil.copytree(workspace, other)
    handler = Recorder()
    with Broker(handler) as broker, Sandbox(workspace, protected=PROTECTED_ROOTS, broker=broker) as a, Sandbox(other, protected=PROTECTED_ROOTS, broker=broker) as b:
        a.exec("cuda-agent build")
        b.exec("CUDA_AGENT_BROKER=/run/cuda-agent/broker.sock cuda-agent build")
        probe = b.exec("ls /run/cuda-agent")
    assert [c[2] for c in handler.calls] == [workspace.resolve(), other.resolve()]
    assert probe.stdout.split() == ["broker.sock"]


def test_bare_handler_gets_its_own_broker(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, broker=lambda c, a, w: BrokerReply("done", 0)) as sb:
        assert sb.exec("cuda-agent submit").stdout == "done\n"


def test_without_broker_the_client_explains(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS) as sb:
        r = sb.exec("cuda-agent build")
    assert r.returncode == 69 and "cannot reach the host service" in r.stderr


def test_client_is_fast_and_stdlib_only(workspace: Path) -> None:
    with Sandbox(workspace, protected=PROTECTED_ROOTS, broker=lambda c, a, w: BrokerReply("ok", 0)) as sb:
        r = sb.exec("python -X importtime -S /opt/cuda-agent/bin/cuda-agent build 2>&1 >/dev/null | "
                    "grep -c -E 'torch|numpy|cuda_agent' || true")
    assert r.stdout.strip() == "0"


def test_malformed_and_stalled_requests_do_not_hurt_the_broker(workspace: Path, monkeypatch) -> None:
    from cuda_agent.sandbox import broker as broker_mod

    monkeypatch.setattr(broker_mod, "REQUEST_TIMEOUT_S", 0.5)
    handler = Recorder()
    with Broker(handler) as broker, Sandbox(workspace, protected=PROTECTED_ROOTS, broker=broker) as sb:
        junk = sb.exec("python -c \"import socket; s=socket.socket(socket.AF_UNIX); "
                       "s.connect('/run/cuda-agent/broker.sock'); s.sendall(b'not json\\n'); print(s.recv(999))\"")
        stalled = sb.exec("python -c \"import socket, time; s=socket.socket(socket.AF_UNIX); "
                          "s.connect('/run/cuda-agent/broker.sock'); s.sendall(b'{'); print(s.recv(999))\"")
        after = sb.exec("cuda-agent build")
    assert "bad request" in junk.stdout
    assert stalled.stdout.strip() == "b''"
    assert after.returncode == 0 and handler.calls and handler.calls[-1][0] == "build"
