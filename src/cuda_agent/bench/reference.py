"""The paper's Table 1 (shipped as ``data/paper_table1.json``), for reports that put our numbers beside it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from cuda_agent.errors import ConfigError

METRIC_KEYS = (
    "pass_rate",
    "faster_than_eager_rate",
    "faster_than_compile_rate",
    "geomean_speedup_vs_eager",
    "geomean_speedup_vs_compile",
)
PAPER_MODEL = "CUDA Agent (ours)"


@dataclass(frozen=True)
class ReferenceRow:
    """One row of the paper's table: a model on a subset (``Overall``, ``Level 1`` ...). A None cell is unknown."""

    subset: str
    model: str
    pass_rate: float | None
    faster_than_eager_rate: float | None
    faster_than_compile_rate: float | None
    geomean_speedup_vs_eager: float | None
    geomean_speedup_vs_compile: float | None

    def value(self, key: str) -> float | None:
        if key not in METRIC_KEYS:
            raise ConfigError(f"unknown metric {key!r}; known: {', '.join(METRIC_KEYS)}")
        return getattr(self, key)


@dataclass(frozen=True)
class ReferenceTable:
    source: str
    rows: tuple[ReferenceRow, ...]

    def models(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.rows))

    def get(self, subset: str, model: str = PAPER_MODEL) -> ReferenceRow | None:
        for row in self.rows:
            if row.subset == subset and row.model == model:
                return row
        return None


def _parse(doc: dict[str, Any]) -> ReferenceTable:
    try:
        rows = tuple(
            ReferenceRow(subset=r["subset"], model=r["model"], **{k: r.get(k) for k in METRIC_KEYS})
            for r in doc["rows"]
        )
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"reference table is malformed: {exc}; expected rows with subset, model and metrics") from exc
    return ReferenceTable(source=str(doc.get("source", "")), rows=rows)


@lru_cache(maxsize=1)
def paper_table() -> ReferenceTable:
    """The CUDA Agent paper's Table 1 (KernelBench levels 1-3), as shipped with the package."""
    text = resources.files("cuda_agent.bench").joinpath("data/paper_table1.json").read_text()
    return _parse(json.loads(text))
