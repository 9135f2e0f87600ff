"""The commands themselves: numeric flags that are not finite (eval --timeout nan, serve --standin nan, ...),
serving without a token off loopback, and `cuda-agent tasks` given a task that hangs, a parquet row that writes
files, and a SIGTERM in the middle of validation."""
from __future__ import annotations

from pathlib import Path

import pytest

from fault_probes import CLI_PROBES, Ledger


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CLI_PROBES))
def test_probe(tmp_path: Path, name: str, request: pytest.FixtureRequest) -> None:
    if name.startswith("tasks_"):
        request.getfixturevalue("needs_sandbox")
    assert CLI_PROBES[name](tmp_path, Ledger())
