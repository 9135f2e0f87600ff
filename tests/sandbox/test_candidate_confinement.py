"""What a candidate evaluated by the real judge can reach (CPU; the same sandbox runs on the GPU hosts).

One probe solution, evaluated once, tries every route and reports what it got in its exception message (the reason
the agent would read): a host file, a secret in the environment of the process that called `evaluate`, the baseline
and build caches, another workspace, the evaluator's source, starting processes. Each route is its own assertion
below; the planted token must appear nowhere in the result. A workspace build must not `#include` a host file: it
fails to compile, and the file's content is absent from the diagnostics.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import cuda_agent
from cuda_agent.evaluator import EvalConfig, EvalResult, evaluate
from cuda_agent.sandbox import sandbox_available
from cuda_agent.workspace import create_workspace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluator"))
from adversarial_corpus import Secrets, resolve_task  # noqa: E402
from adversarial_corpus import secrets  # noqa: E402,F401  (the fixture: secrets planted for this module)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox_available("userns"), reason="needs bubblewrap")]

PROBE = r'''
import glob, json, os, subprocess, sys
import torch, torch.nn as nn

TARGETS = json.loads({targets!r})


def attempt(fn):
    try:
        got = fn()
    except Exception as exc:  # noqa: BLE001 - blocked
        return "blocked: " + type(exc).__name__
    return "READ: " + repr(got)[:300] if got else "blocked: nothing"


def read(path):
    with open(path, errors="replace") as fh:
        return fh.read(300)


def environments():
    found = [k + "=" + v for k, v in os.environ.items()]
    for path in glob.glob("/proc/*/environ"):
        try:
            with open(path, "rb") as fh:
                found += [path + ": " + item for item in fh.read().decode(errors="replace").split("\0")]
        except OSError:
            pass
    return [item for item in found if TARGETS["token"] in item]


def listing(folder):
    return [read(p) for p in glob.glob(os.path.join(folder, "**", "*"), recursive=True) if os.path.isfile(p)]


def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


REPORT = {{
    "host_file": attempt(lambda: read(TARGETS["host_file"])),
    "host_tmp_file": attempt(lambda: read(TARGETS["host_tmp_file"])),
    "environment": attempt(environments),
    "baseline_cache": attempt(lambda: listing(TARGETS["baseline_cache"])),
    "build_cache": attempt(lambda: listing(TARGETS["build_cache"])),
    "other_workspace": attempt(lambda: read(TARGETS["other_workspace"])),
    "project_source": attempt(lambda: listing(TARGETS["project_source"])[:1]),
    "fork": attempt(fork),
    "exec": attempt(lambda: subprocess.run(["/bin/true"], check=True) and "ran"),
    "spawn": attempt(lambda: os.waitpid(os.posix_spawn("/bin/true", ["/bin/true"], {{}}), 0) and "spawned"),
}}


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        raise RuntimeError("PROBE" + json.dumps(REPORT) + "PROBE")
'''


@pytest.fixture(scope="module")
def probe(secrets: Secrets, tmp_path_factory: pytest.TempPathFactory) -> tuple[EvalResult, dict[str, str]]:
    """The probe, evaluated once by a freshly spawned judge whose environment (inherited from this process's
    os.environ) holds the token."""
    targets = {
        "token": secrets.token,
        "host_file": str(secrets.root / "secret.txt"),
        "host_tmp_file": "/tmp/cuda-agent-adversarial/secret.txt",
        "baseline_cache": str(secrets.root / "cache" / "baselines"),
        "build_cache": str(secrets.root / "cache" / "build"),
        "other_workspace": str(secrets.root / "other_workspace" / "model_new.py"),
        "project_source": str(Path(cuda_agent.__file__).resolve().parent / "evaluator"),
    }
    solution = tmp_path_factory.mktemp("probe") / "probe.py"
    solution.write_text(PROBE.format(targets=json.dumps(targets)))
    saved = dict(os.environ)
    os.environ.update(secrets.env_with_cache)
    try:
        result = evaluate(resolve_task("small_linear_relu"), solution,
                          EvalConfig(mode="relaxed", device="cpu", profile=False, timeout_s=300, max_log_chars=20000))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    match = re.search(r"PROBE(\{.*?\})PROBE", result.reason)
    assert match, (result.stage, result.reason[:2000], result.log[-2000:])
    return result, json.loads(match.group(1))


def _blocked(report: dict[str, Any], route: str) -> None:
    assert report[route].startswith("blocked"), f"{route}: {report[route]}"


@pytest.mark.parametrize("route", ["host_file", "host_tmp_file", "baseline_cache", "build_cache", "other_workspace",
                                   "project_source"])
def test_candidate_cannot_read(probe: tuple[EvalResult, dict[str, str]], route: str) -> None:
    _blocked(probe[1], route)


def test_candidate_cannot_read_the_callers_environment(probe: tuple[EvalResult, dict[str, str]]) -> None:
    _blocked(probe[1], "environment")


@pytest.mark.parametrize("route", ["fork", "exec", "spawn"])
def test_candidate_cannot_start_processes(probe: tuple[EvalResult, dict[str, str]], route: str) -> None:
    _blocked(probe[1], route)


def test_nothing_planted_reaches_the_result(probe: tuple[EvalResult, dict[str, str]], secrets: Secrets) -> None:
    result, _ = probe
    assert result.reward == -1
    assert not secrets.leaked(result)
    assert not secrets.tampered()


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_workspace_build_cannot_include_a_host_file(secrets: Secrets, tmp_path: Path) -> None:
    task = resolve_task("small_linear_relu")
    kernel = f'#include "cuda_agent.h"\n#include "{secrets.root / "secret.txt"}"\n'
    ws = create_workspace(task, tmp_path / "ws", solution={"kernels/leak.cu": kernel})
    result = evaluate(task, ws.root, EvalConfig(mode="relaxed", device="cpu", profile=False, timeout_s=300, arch="90",
                                                build_cache_dir=str(tmp_path / "build-cache")))
    assert result.stage == "build_failed", (result.stage, result.reason[:1000])
    assert "secret.txt" in result.reason  # the compiler says which include it could not find ...
    assert not secrets.leaked(result)  # ... and nothing of what the file holds


def test_workspace_symlink_cannot_bring_in_a_host_file(secrets: Secrets, tmp_path: Path) -> None:
    task = resolve_task("small_linear_relu")
    ws = create_workspace(task, tmp_path / "ws")
    (ws.root / "model_new.py").unlink()
    os.symlink(secrets.root / "secret.txt", ws.root / "model_new.py")
    result = evaluate(task, ws.root, EvalConfig(mode="relaxed", device="cpu", profile=False, timeout_s=300))
    assert result.reward == -1
    assert not secrets.leaked(result)
