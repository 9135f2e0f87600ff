"""`measure_overhead_ms` measures a real sandboxed `true`."""
from __future__ import annotations

import pytest

from cuda_agent.sandbox import measure_overhead_ms


def test_overhead_is_measured(bwrap_ready: None) -> None:
    calls: list[tuple[int, int]] = []
    ms = measure_overhead_ms(3, progress=lambda i, n: calls.append((i, n)))
    assert 1.0 < ms < 5000.0
    assert calls == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(ValueError):
        measure_overhead_ms(0)
