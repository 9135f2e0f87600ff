"""The `Task`: a PyTorch reference module in KernelBench format, with its metadata."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Task:
    """One optimisation task.

    Attributes:
        id: stable identifier, unique within a task set (``L1/19_ReLU``, ``ops6k/00042``, ``user/my_model``).
        code: source of a module defining ``Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``.
        source: where the task came from (``kernelbench``, ``kernelbench-hf``, ``ops6k``, ``user``, ``synth``).
        level: KernelBench level (1-3) where known.
        name: a human-readable name (the file stem for KernelBench: ``19_ReLU``).
        ops: operator names where known (from Ops-6K's ``ops`` column, or found in the code).
        path: the file it was read from, if any.
        metadata: anything else worth keeping (data_source, problem id, ...).
    """

    id: str
    code: str
    source: str = "user"
    level: int | None = None
    name: str = ""
    ops: tuple[str, ...] = ()
    path: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def code_hash(self) -> str:
        """SHA-256 of the reference source: what caches key on."""
        return hashlib.sha256(self.code.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "code": self.code,
            "source": self.source,
            "level": self.level,
            "name": self.name,
            "ops": list(self.ops),
            "path": self.path,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Task":
        return cls(
            id=data["id"],
            code=data["code"],
            source=data.get("source", "user"),
            level=data.get("level"),
            name=data.get("name", ""),
            ops=tuple(data.get("ops", ())),
            path=data.get("path"),
            metadata=dict(data.get("metadata", {})),
        )
