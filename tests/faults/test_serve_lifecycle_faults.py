"""`cuda-agent serve` with its store truncated under it, and ended by SIGTERM, SIGINT, SIGHUP, a drain that runs
out of time, and a second signal: health and submissions say what is wrong, every accepted job is on record, and
no process the server started is left."""
from __future__ import annotations

from pathlib import Path

import pytest

from fault_probes import LIFECYCLE_PROBES, Ledger


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LIFECYCLE_PROBES))
def test_probe(tmp_path: Path, name: str) -> None:
    ledger = Ledger()
    assert LIFECYCLE_PROBES[name](tmp_path, ledger)
    assert not ledger.lost, f"accepted jobs with no record: {ledger.lost}"
