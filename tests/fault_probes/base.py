"""What every fault probe shares: its result, the ledger of accepted jobs, and stand-in job bodies."""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from fault_probes.server import Reply, ServeProcess

TASK = {
    "id": "faults/relu",
    "code": ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(16)]\n\n"
             "def get_init_inputs():\n    return []\n"),
    "source": "faults",
    "name": "relu",
}


@dataclass
class ProbeResult:
    """One probe: whether the server behaved as it must, and what was seen."""

    name: str
    passed: bool
    detail: str
    seconds: float = 0.0
    jobs_submitted: int = 0
    jobs_lost: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, "seconds": round(self.seconds, 3),
                "jobs_submitted": self.jobs_submitted, "jobs_lost": self.jobs_lost}


class ProbeFailed(AssertionError):
    """A probe saw the server misbehave; the message says how."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise ProbeFailed(message)


def job_body(*, seconds: float = 0.05, fault: str | None = None, **fields: Any) -> dict[str, Any]:
    """A `POST /v1/evaluations` body for the stand-in evaluator (``seconds`` of work, an optional fault), with a
    fresh job id; ``fields`` override top-level fields."""
    spec: dict[str, Any] = {"seconds": seconds}
    if fault is not None:
        spec["fault"] = fault
    # ModelNew: the stand-in scores the job correct (reward 1; see `StandInEvaluator`).
    files = {"model_new.py": f"# {uuid.uuid4().hex}\nclass ModelNew:\n    pass\n", "standin.json": json.dumps(spec)}
    body: dict[str, Any] = {"task": dict(TASK), "solution": {"kind": "workspace", "encoding": "text", "files": files},
                            "kind": "full", "job_id": f"probe-{uuid.uuid4().hex[:16]}", "force": True}
    body.update(fields)
    return body


class Ledger:
    """Every job a server accepted (202), and those that never reached a final state (``lost``)."""

    def __init__(self) -> None:
        self.accepted: list[str] = []
        self.lost: list[str] = []

    def submit(self, server: ServeProcess, body: dict[str, Any], **kwargs: Any) -> Reply:
        reply = server.request("POST", "/v1/evaluations", body, **kwargs)
        if reply.status == 202 and isinstance(reply.json, dict):
            self.accepted.append(str(reply.json["id"]))
        return reply

    def settle_live(self, server: ServeProcess, timeout_s: float = 120.0) -> list[str]:
        """Ask the running server about every accepted job: those not done or failed (with a reason) within
        ``timeout_s`` in all are lost."""
        deadline = time.monotonic() + timeout_s
        self.lost = []
        for job_id in self.accepted:
            status = server.wait_for(job_id, max(1.0, deadline - time.monotonic()))
            finished = (status.get("status") == "done" and status.get("result")) or (
                status.get("status") == "failed" and status.get("error"))
            if not finished:
                self.lost.append(job_id)
        return self.lost

    def settle_stored(self, store_url: str) -> list[str]:
        """After the server exited: accepted jobs with no record in its store are lost."""
        from cuda_agent.store import Store

        with Store.open(store_url) as store:
            stored = {record.job_id for record in store.records()}
        self.lost = [job_id for job_id in self.accepted if job_id not in stored]
        return self.lost


def run_probe(name: str, probe: Callable[[], str]) -> ProbeResult:
    """Run ``probe`` (it returns what it saw, or raises `ProbeFailed`); any other exception fails it too."""
    started = time.monotonic()
    try:
        detail = probe()
        passed = True
    except ProbeFailed as exc:
        detail, passed = str(exc), False
    except Exception as exc:  # noqa: BLE001 - a probe that breaks is a failed probe, with the reason
        detail, passed = f"{type(exc).__name__}: {exc}", False
    return ProbeResult(name, passed, detail, time.monotonic() - started)
