"""`LocalModelServer` without llama.cpp: a stand-in "python" that serves GET /v1/models on the given port and
starts a child of its own, so that start, readiness, the model list, and stopping the whole process group are
checked on any machine. (tests/agent/test_agent_real_model.py runs the real server when it is installed.)"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.agent.local_server import LocalModelServer, LocalServerConfig, ServerError, find_llama_python
from cuda_agent.errors import ConfigError

STAND_IN = r'''#!/usr/bin/env bash
# called as: PY -m llama_cpp.server --model M --host 127.0.0.1 --port P --n_ctx N --model_alias A
while [ $# -gt 0 ]; do case "$1" in --port) PORT=$2; shift;; --model_alias) ALIAS=$2; shift;; esac; shift; done
sleep 1000 &
echo $! > "$(dirname "$0")/child.pid"
[ -n "$FAIL" ] && { echo "error loading model: boom"; exit 3; }
exec PYTHON -c "
import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({'object': 'list', 'data': [{'id': '$ALIAS'}]}).encode()
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', $PORT), H).serve_forever()
"
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "python"
    script.write_text(STAND_IN.replace("PYTHON", sys.executable))
    script.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    return script, model


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_start_lists_the_model_and_stop_ends_the_group(stand_in, tmp_path: Path) -> None:
    script, model = stand_in
    config = LocalServerConfig(model=model, python=str(script), model_name="tiny", log_path=tmp_path / "log",
                               startup_timeout_s=30)
    with LocalModelServer(config) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.models() == ["tiny"]
        child = int((tmp_path / "child.pid").read_text())
        assert _alive(child)
        pid = server.proc.pid
    assert server.proc is None
    deadline = time.monotonic() + 10
    while (_alive(child) or _alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child) and not _alive(pid)


def test_a_server_that_exits_is_reported_with_its_log(stand_in, tmp_path: Path, monkeypatch) -> None:
    script, model = stand_in
    monkeypatch.setenv("FAIL", "1")
    server = LocalModelServer(LocalServerConfig(model=model, python=str(script), log_path=tmp_path / "log",
                                                startup_timeout_s=30))
    with pytest.raises(ServerError, match="(?s)exited with code 3.*boom"):
        server.start()
    assert server.proc is None


def test_missing_pieces_are_named(stand_in, tmp_path: Path, monkeypatch) -> None:
    script, model = stand_in
    with pytest.raises(ConfigError, match="no such model file"):
        LocalModelServer(LocalServerConfig(model=tmp_path / "none.gguf", python=str(script))).start()
    monkeypatch.setenv("CUDA_AGENT_LLAMA_PYTHON", str(tmp_path / "no-python"))
    assert find_llama_python() is None
    with pytest.raises(ConfigError, match="llama-cpp-python is not installed"):
        LocalModelServer(LocalServerConfig(model=model)).start()


def test_serve_model_command_stops_its_server_on_sigterm(stand_in, tmp_path: Path) -> None:
    import signal
    import subprocess

    script, model = stand_in
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "cuda_agent.cli.main", "serve-model", "--model", str(model),
                             "--python", str(script), "--port", "0", "--name", "tiny", "--log", str(tmp_path / "log")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if "serving" in line or len(lines) > 40:
            break
    assert any("serving tiny at http://127.0.0.1:" in line for line in lines), lines
    child = int((tmp_path / "child.pid").read_text())
    assert _alive(child)
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 0 and "model server stopped" in rest
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)
