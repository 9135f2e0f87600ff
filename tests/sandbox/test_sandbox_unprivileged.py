"""The sandbox as an ordinary (non-root) user runs it: the ``userns`` identity, with the process limit enforced.

On a root test machine this drops a child Python to uid 65534 with setpriv and runs the sandbox from there.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import cuda_agent

SCRIPT = r"""
import json, sys, tempfile, pathlib
sys.path.insert(0, sys.argv[1])
from cuda_agent.sandbox import Sandbox, SandboxLimits, BrokerReply
from cuda_agent.workspace import PROTECTED_ROOTS
ws = pathlib.Path(tempfile.mkdtemp()) / "ws"; ws.mkdir(); (ws / "model.py").write_text("ref\n")
out = {}
with Sandbox(ws, protected=PROTECTED_ROOTS, limits=SandboxLimits(max_processes=24, timeout_s=4),
             broker=lambda c, a, w: BrokerReply("ok " + c, 0)) as sb:
    out["identity"] = sb.identity
    r = sb.exec("id -u; echo x > agent.txt; echo y > model.py; cuda-agent build")
    out["stdout"] = r.stdout
    bomb = sb.exec(":(){ :|:& };:; sleep 10")
    out["peak"] = bomb.peak_processes
    out["bomb"] = [v.kind for v in bomb.violations]
out["model"] = (ws / "model.py").read_text()
out["agent"] = (ws / "agent.txt").read_text()
import shutil; shutil.rmtree(ws.parent)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_sandbox_from_an_unprivileged_host_user(bwrap_ready: None) -> None:
    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(python):
        pytest.skip("needs root (to drop to uid 65534), setpriv and a system /usr/bin/python3")
    src = str(Path(cuda_agent.__file__).resolve().parents[1])
    if os.stat(src).st_mode & 0o005 != 0o005:
        pytest.skip(f"{src} is not readable by other users")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", SCRIPT, src],
                          capture_output=True, text=True, timeout=120, cwd="/")
    if "cannot create the sandbox's namespaces" in done.stderr:
        pytest.skip(f"unprivileged user namespaces are not available here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["identity"] == "userns"
    assert out["stdout"].splitlines() == ["65534", "ok build"]
    assert out["model"] == "ref\n" and out["agent"] == "x\n"
    assert "fork_bomb" in out["bomb"] and out["peak"] <= 24 + 2
