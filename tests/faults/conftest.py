"""A real `cuda-agent serve` on 127.0.0.1 (stand-in evaluator) shared by the HTTP fault tests of a module; it is
stopped by the fixture, which then checks that no process it started is left and no accepted job was lost."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from fault_probes import SERVER_ARGS, Ledger, ServeProcess
from cuda_agent.sandbox import sandbox_available


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Ledger]]:
    store = tmp_path_factory.mktemp("faults") / "store.db"
    server = ServeProcess.start(store=f"sqlite:///{store}", args=SERVER_ARGS)
    ledger = Ledger()
    try:
        yield server, ledger
        lost = ledger.settle_live(server)
    finally:
        code, left = server.stop()
    assert code == 0 and not left, f"serve exited {code}, processes left: {left}"
    assert not lost, f"accepted jobs that never finished: {lost}"


@pytest.fixture
def needs_sandbox() -> None:
    if not sandbox_available():
        pytest.skip("task validation runs in the bubblewrap sandbox, which cannot run here")


def probe_folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder
