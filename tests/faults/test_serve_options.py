"""`cuda-agent serve` options around the probes: the stand-in without --gpus, serving without a token only when
asked (loopback), and a token file."""
from __future__ import annotations

import stat
from pathlib import Path

from fault_probes.base import job_body
from fault_probes.server import ServeProcess


def test_standin_needs_no_gpus_flag_and_a_token_is_made() -> None:
    server = ServeProcess.start(store="none", gpus=())
    try:
        assert server.token and len(server.token) >= 32
        assert server.request("GET", "/v1/health", token=None).status == 401
        health = server.health()
        assert health["workers"] >= 1 and health["status"] == "ok"
        reply = server.request("POST", "/v1/evaluations", job_body(seconds=0.01))
        assert reply.status == 202
        assert server.wait_for(reply.json["id"], 60)["result"]["correct"]
    finally:
        code, left = server.stop()
    assert code == 0 and not left


def test_insecure_no_token_is_explicit_and_loud(tmp_path: Path) -> None:
    server = ServeProcess.start(store="none", args=["--insecure-no-token"])
    try:
        assert server.token is None
        assert any("INSECURE" in line for line in server.output)
        assert server.request("GET", "/v1/health", token=None).status == 200
    finally:
        code, left = server.stop()
    assert code == 0 and not left


def test_token_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "token"
    server = ServeProcess.start(store="none", args=["--token", "s3cret-token-value", "--token-file", str(path)])
    try:
        assert path.read_text().strip() == "s3cret-token-value"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not any("s3cret-token-value" in line for line in server.output), "a given token is not echoed"
        server.token = "s3cret-token-value"
        assert server.health()["ok"]
    finally:
        code, left = server.stop()
    assert code == 0 and not left
