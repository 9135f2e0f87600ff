"""A synthesis run: compose candidates, filter them, keep the good ones, write parquet; resumable after a kill.

Every decided candidate (accepted or rejected, with its reason) is appended to ``<out>.state.jsonl`` and flushed
before the next is decided, so a killed run loses only the candidates in flight. Composers are deterministic per
candidate index (the rule composer) or simply asked again (the LLM), so a resumed run skips decided indices and
goes on. The parquet is rewritten atomically from the state after the run (and on interruption).
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from cuda_agent.errors import ConfigError
from cuda_agent.locations import kernelbench_root
from cuda_agent.synth.compose import Composed
from cuda_agent.synth.decontam import SimilarityIndex, kernelbench_index, model_signature
from cuda_agent.synth.filters import REASONS, FilterConfig, FilterResult, static_check

log = logging.getLogger(__name__)

SYNTH_VERSION = "1"
DATA_SOURCE = "cuda-agent-synth"


class Composer(Protocol):
    """Anything that turns a candidate index into a candidate task (or None when it cannot)."""

    name: str

    def compose(self, index: int) -> Composed | None: ...


@dataclass(frozen=True)
class SynthConfig:
    """Settings of a synthesis run."""

    n: int = 300
    """Accepted tasks wanted."""
    seed: int = 0
    """Seed of the composer (candidate ``i`` of a seed is always the same for the rule composer)."""
    workers: int = 0
    """Worker processes for the execution filters; 0 runs them in this process (no time cap)."""
    task_timeout_s: float = 120.0
    """Cap on one candidate's filtering in a worker (compile included)."""
    max_candidates: int | None = None
    """Stop after this many candidate indices (default: 10 per wanted task)."""
    time_budget_s: float | None = None
    """Stop submitting after this many seconds, then wait for the candidates in flight."""
    kb_threshold: float = 0.9
    """Reject a candidate whose Model is at least this similar to a KernelBench task."""
    dup_threshold: float = 0.9
    """Reject a candidate at least this similar to an accepted one."""
    kernelbench: str | None = None
    """KernelBench task folder for decontamination (default: `cuda_agent.locations.kernelbench_root()`)."""
    filters: FilterConfig = field(default_factory=FilterConfig)
    """Execution filter settings."""

    def fingerprint(self, composer: str) -> dict[str, Any]:
        """What must match for a run to resume from an existing state file."""
        return {"composer": composer, "seed": self.seed, "device": self.filters.device,
                "min_ms": self.filters.min_ms, "max_ms": self.filters.max_ms, "version": SYNTH_VERSION}


@dataclass(frozen=True)
class Record:
    """One decided candidate, as the state file keeps it."""

    index: int
    accepted: bool
    reason: str
    detail: str
    code: str
    ops: tuple[str, ...]
    composer: str
    runtime_ms: float | None = None
    scale: int = 1
    compile_s: float | None = None
    kb_nearest: str = ""
    kb_similarity: float = 0.0

    def to_json(self) -> str:
        return json.dumps({"kind": "candidate", **asdict(self), "ops": list(self.ops)})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Record":
        data = {k: v for k, v in data.items() if k != "kind"}
        return cls(**{**data, "ops": tuple(data.get("ops", ()))})


@dataclass(frozen=True)
class SynthSummary:
    """What a run produced: counts per outcome, and where the files are."""

    generated: int
    accepted: int
    rejected: dict[str, int]
    resumed: int
    seconds: float
    out: str
    state: str

    def metrics(self) -> dict[str, float]:
        """Flat numbers for a benchmark result: generated, accepted, and one count per rejection reason."""
        out: dict[str, float] = {"generated": self.generated, "accepted": self.accepted, "seconds": round(self.seconds, 1)}
        for reason in REASONS:
            out[f"rejected_{reason}"] = self.rejected.get(reason, 0)
        return out


@dataclass(frozen=True)
class Progress:
    """A progress event for a callback: counts so far and the candidate just decided."""

    generated: int
    accepted: int
    target: int
    in_flight: int
    last: Record | None = None


def state_path(out: Path) -> Path:
    return out.with_name(out.name + ".state.jsonl")


def read_state(path: Path, fingerprint: dict[str, Any]) -> list[Record]:
    """The records of an earlier run; raises `ConfigError` if that run had other settings. A torn last line (the
    run was killed while writing) is ignored."""
    if not path.exists():
        return []
    records: list[Record] = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) - 1:
                log.warning("%s: ignoring a torn last line (the run was killed mid-write)", path)
                continue
            raise ConfigError(f"{path}:{number + 1}: not JSON; delete the state file to start afresh") from None
        if data.get("kind") == "header":
            if data.get("fingerprint") != fingerprint:
                raise ConfigError(
                    f"{path}: made by a run with other settings ({data.get('fingerprint')} vs {fingerprint}); "
                    "use another --out, or delete the state file to start afresh"
                )
        elif data.get("kind") == "candidate":
            records.append(Record.from_dict(data))
    return records


class _StateWriter:
    def __init__(self, path: Path, fingerprint: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists() or path.stat().st_size == 0
        if not fresh:
            with path.open("rb+") as fh:  # drop a torn last line before appending
                data = fh.read()
                if data and not data.endswith(b"\n"):
                    fh.truncate(data.rfind(b"\n") + 1)
        self._fh = path.open("a")
        if fresh:
            self._write(json.dumps({"kind": "header", "fingerprint": fingerprint}))

    def _write(self, line: str) -> None:
        self._fh.write(line + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def append(self, record: Record) -> None:
        self._write(record.to_json())

    def close(self) -> None:
        self._fh.close()


def write_parquet(records: list[Record], out: Path, *, seed: int, device: str) -> Path:
    """Write accepted records with the published columns (``ops``, ``data_source``, ``code``) and our metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kept = sorted((r for r in records if r.accepted), key=lambda r: r.index)
    table = pa.table({
        "ops": pa.array([list(r.ops) for r in kept], type=pa.list_(pa.string())),
        "data_source": [f"{DATA_SOURCE}:{r.composer}" for r in kept],
        "code": [r.code for r in kept],
        "name": [f"synth_{r.composer}_{seed}_{r.index:06d}" for r in kept],
        "composer": [r.composer for r in kept],
        "seed": pa.array([seed] * len(kept), type=pa.int64()),
        "candidate_index": pa.array([r.index for r in kept], type=pa.int64()),
        "n_ops": pa.array([len(r.ops) for r in kept], type=pa.int64()),
        "runtime_ms": pa.array([r.runtime_ms for r in kept], type=pa.float64()),
        "runtime_device": [device] * len(kept),
        "size_scale": pa.array([r.scale for r in kept], type=pa.int64()),
        "compile_s": pa.array([r.compile_s for r in kept], type=pa.float64()),
        "kb_nearest": [r.kb_nearest for r in kept],
        "kb_similarity": pa.array([r.kb_similarity for r in kept], type=pa.float64()),
        "synth_version": [SYNTH_VERSION] * len(kept),
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)
    return out


class SynthRun:
    """One resumable synthesis run into ``out``."""

    def __init__(
        self,
        composer: Composer,
        config: SynthConfig,
        out: str | Path,
        progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.composer = composer
        self.config = config
        self.out = Path(out)
        self.state = state_path(self.out)
        self.progress = progress or (lambda _p: None)
        if config.kernelbench is not None:
            kb_root: str | Path | None = config.kernelbench
        else:
            kb_root = kernelbench_root()
        self.kb = kernelbench_index(kb_root)

    def run(self) -> SynthSummary:
        """Run until ``n`` tasks are accepted, candidates run out, or the time budget is spent."""
        cfg = self.config
        start = time.monotonic()
        fingerprint = cfg.fingerprint(self.composer.name)
        records = read_state(self.state, fingerprint)
        resumed = len(records)
        done = {r.index for r in records}
        accepted = SimilarityIndex()
        for r in records:
            if r.accepted:
                accepted.add(str(r.index), r.code)
        writer = _StateWriter(self.state, fingerprint)
        limit = cfg.max_candidates if cfg.max_candidates is not None else 10 * cfg.n + 20
        from cuda_agent.synth.filter_workers import WorkerPool

        # Rationale: a candidate is model-written code; it runs only in a sandboxed worker, never in this process
        pool = WorkerPool(max(1, cfg.workers), cfg.filters, cfg.task_timeout_s)
        in_flight: dict[int, tuple[Composed, str, float]] = {}
        n_accepted = sum(r.accepted for r in records)

        def decide(record: Record) -> None:
            nonlocal n_accepted
            records.append(record)
            writer.append(record)
            if record.accepted:
                n_accepted += 1
                accepted.add(str(record.index), record.code)
            self.progress(Progress(len(records), n_accepted, cfg.n, len(in_flight), record))

        index = 0
        try:
            while True:
                out_of_time = cfg.time_budget_s is not None and time.monotonic() - start > cfg.time_budget_s
                can_submit = (not out_of_time and n_accepted < cfg.n and index < limit
                              and pool.idle > 0)
                if can_submit:
                    if index not in done:
                        self._prepare(index, accepted, in_flight, decide, pool)
                    index += 1
                    continue
                if not in_flight:
                    break
                results = pool.poll(0.5)
                for i, result in results:
                    composed, nearest, score = in_flight.pop(i)
                    decide(self._verdict(composed, result, nearest, score, accepted))
        finally:
            writer.close()
            pool.close()
            write_parquet(records, self.out, seed=cfg.seed, device=cfg.filters.device)
        counts = Counter(r.reason for r in records if not r.accepted)
        summary = SynthSummary(
            generated=len(records), accepted=n_accepted, rejected=dict(counts), resumed=resumed,
            seconds=time.monotonic() - start, out=str(self.out), state=str(self.state),
        )
        log.info("synth: %d generated, %d accepted, rejected %s", summary.generated, summary.accepted, dict(counts))
        return summary

    def _prepare(self, index: int, accepted: SimilarityIndex, in_flight: dict[int, tuple[Composed, str, float]],
                 decide: Callable[[Record], None], pool: Any) -> None:
        """Compose candidate ``index`` and run the checks that need no execution; submit it if they pass."""
        try:
            composed = self.composer.compose(index)
        except Exception as exc:  # an LLM endpoint or a composer bug must not end the run
            log.warning("composer failed on candidate %d: %s", index, exc)
            composed = None
            failure = f"{type(exc).__name__}: {exc}"
        else:
            failure = "the composer produced no candidate"
        if composed is None:
            decide(Record(index, False, "compose_failed", failure[:500], "", (), self.composer.name))
            return
        static = static_check(composed.code)
        if static is not None:
            decide(self._record(composed, static))
            return
        signature = model_signature(composed.code)
        match = self.kb.nearest(signature, self.config.kb_threshold) if signature is not None else None
        if match is not None:
            decide(self._record(composed, FilterResult.reject(
                "contaminated", f"{match.score:.2f} similar to KernelBench {match.key}", composed.code),
                match.key, match.score))
            return
        dup = accepted.nearest(signature, self.config.dup_threshold) if signature is not None else None
        pending = SimilarityIndex()
        for i, (other, _, _) in in_flight.items():
            pending.add(str(i), other.code)
        dup = dup or (pending.nearest(signature, self.config.dup_threshold) if signature is not None else None)
        if dup is not None:
            decide(self._record(composed, FilterResult.reject(
                "near_duplicate", f"{dup.score:.2f} similar to candidate {dup.key}", composed.code)))
            return
        nearest = self.kb.nearest(signature, 0.0) if signature is not None else None
        in_flight[index] = (composed, nearest.key if nearest else "", nearest.score if nearest else 0.0)
        if pool is not None:
            pool.submit(index, composed.code)

    def _verdict(self, composed: Composed, result: FilterResult, nearest: str, score: float,
                 accepted: SimilarityIndex) -> Record:
        if result.ok:
            dup = accepted.nearest(result.code or composed.code, self.config.dup_threshold)
            if dup is not None:
                result = FilterResult.reject("near_duplicate", f"{dup.score:.2f} similar to candidate {dup.key}",
                                             result.code, runtime_ms=result.runtime_ms, scale=result.scale)
        return self._record(composed, result, nearest, score)

    def _record(self, composed: Composed, result: FilterResult, nearest: str = "", score: float = 0.0) -> Record:
        return Record(
            index=composed.index, accepted=result.ok, reason=result.reason, detail=result.detail,
            code=result.code or composed.code, ops=composed.ops, composer=composed.composer,
            runtime_ms=result.runtime_ms, scale=result.scale, compile_s=result.compile_s,
            kb_nearest=nearest, kb_similarity=round(score, 4),
        )
