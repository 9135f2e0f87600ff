"""What careless and hostile clients do to a running `cuda-agent serve`: every numeric field given NaN, Infinity,
negative and huge numbers, wrong types, broken Content-Length, unknown methods and routes, no token, slow and many
clients, the connection cap, a worker SIGKILLed mid-job. Each probe asserts the exact answer (status, JSON error
naming the field) and that the server still evaluates afterwards; the fixture checks no job was lost."""
from __future__ import annotations

import pytest

from fault_probes import HTTP_PROBES, Ledger, ServeProcess


@pytest.mark.parametrize("name", list(HTTP_PROBES))
def test_probe(served: tuple[ServeProcess, Ledger], name: str) -> None:
    server, ledger = served
    detail = HTTP_PROBES[name](server, ledger)  # raises ProbeFailed (an AssertionError) saying what went wrong
    assert detail
