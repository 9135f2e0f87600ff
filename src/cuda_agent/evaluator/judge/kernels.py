"""Reading the kernel tap's records: decoy kernels, PyTorch compute in strict mode, a tap that was switched off.

The records come from the candidate's own process, so they are evidence, not proof, and every rule here is backed by
something the candidate cannot write: which kernels are its own comes from the compiler (`prepare`), and the tap
must show, for every call, the output copy the runner itself made there (a tap switched off or filtered loses it).
A kernel's name never says who launched it: PyTorch's launches are attributed by the PyTorch operator that was
running when the kernel was launched, and a name PyTorch uses counts as PyTorch's unless the solution compiled a
kernel of exactly that name itself.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from cuda_agent.evaluator.profile import kernel_origin

# PyTorch operators a strict forward may run: allocation and filling (zeros, full, ...), nothing that computes.
# ``aten::to`` itself is a no-op where nothing changes (``h0.to(x.device)`` on the device already, seen refusing an
# honest RNN on the H200); a real conversion runs ``aten::_to_copy`` and ``aten::copy_``, which stay refused.
STRICT_ALLOWED_OPS = re.compile(
    r"^aten::(to|empty|empty_like|empty_strided|new_empty|new_empty_strided|zeros|zeros_like|ones|ones_like|full|"
    r"full_like|fill_|zero_|resize_|new_zeros|new_ones|new_full|scalar_tensor|lift_fresh|detach|alias|view|"
    r"as_strided|reshape|_reshape_alias|expand|permute|transpose|t|squeeze|unsqueeze|select|slice|narrow|unfold|"
    r"split|chunk|unbind|flatten|unflatten|contiguous|record_stream|set_|item|_local_scalar_dense|size|stride|"
    r"is_contiguous|numel|dim)$")


# What the runner's own output copy runs (``dst.copy_(src)``, same dtype and device).
COPY_OPS = frozenset({"aten::copy_"})


def _normal(name: str) -> str:
    """A kernel name without a leading return type, as both ptxas/c++filt and the profiler may print it."""
    name = name.strip()
    return name[5:] if name.startswith("void ") else name


def _base(name: str) -> str:
    """The identifier of a kernel name: no return type, template arguments or parameter list."""
    name = _normal(name)
    name = name.split("(", 1)[0]
    return name.split("<", 1)[0].strip()


@dataclass
class KernelAudit:
    """What the records say; ``rules`` are (rule, detail) pairs."""

    rules: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    own_launched: int = 0
    launches: int = 0


def audit(inventory: dict[str, Any], tokens: list[int], own_kernels: tuple[str, ...], *, strict: bool,
          expect_copies: bool, replays: Sequence[tuple[int, int]] = ()) -> KernelAudit:
    """Audit the records of the calls ``tokens`` (every checked call launched from the host, and the calls made
    while capturing a graph: their operators are recorded though nothing runs) and of the replayed requests
    ``replays`` ((first token, output copies the graph holds) each). ``expect_copies``: the runner copied outputs
    in each of these calls, so each must show a memcpy; a replay must show the runner's graph launch."""
    result = KernelAudit()
    calls = inventory.get("calls") if isinstance(inventory.get("calls"), dict) else {}
    if not inventory.get("ok") or not inventory.get("tap"):
        result.rules.append(("audit_evasion", "the kernel tap returned no records "
                                              f"({str(inventory.get('reason', 'tap off'))[:200]})"))
        return result
    own_full = {_normal(k) for k in own_kernels}
    own_base = {_base(k) for k in own_kernels}
    missing_copy = [t for t in tokens if expect_copies and not any(
        r.get("kind") == "memcpy" or (r.get("kind") == "op" and r.get("name") == "aten::copy_")
        for r in calls.get(f"copy:{t}", []))]
    if missing_copy:
        # Rationale: the tap runs in the candidate's process; the runner's own copy of the outputs happens in every
        # call, so a call whose records lack it had its records switched off or filtered.
        result.rules.append(("audit_evasion", f"{len(missing_copy)} of {len(tokens)} calls have no record of the "
                                              "evaluator's own output copy"))
    unseen = [first for first, _ in replays
              if not any(r.get("kind") == "graph_launch" for r in calls.get(f"graph:{first}", []))]
    if unseen:
        # Rationale: the runner launches the graph inside the replay's range in every replayed request, so a replay
        # whose records lack that launch had its records switched off or filtered. (The launch, not the replayed
        # copies: what the profiler records of a graph's nodes depends on its CUPTI version.)
        result.rules.append(("audit_evasion", f"{len(unseen)} of {len(replays)} replayed requests have no record of "
                                              "the evaluator's own graph launch"))
    forbidden: dict[str, int] = {}
    moved: dict[str, int] = {}
    for token in tokens:
        # Rationale: the runner's copy range must hold the copy only; anything else there is work moved out of
        # forward (out of its timing, and out of strict mode's view) into the evaluator's own copy.
        for record in calls.get(f"copy:{token}", []):
            name = str(record.get("name") or "")
            op = str(record.get("op") or "")
            if (record.get("kind") == "op" and name not in COPY_OPS) or \
                    (record.get("kind") == "kernel" and op not in ("", *COPY_OPS)):
                key = f"{op or name}"[:80]
                moved[key] = moved.get(key, 0) + 1
    if moved:
        shown = ", ".join(f"{k} x{n}" for k, n in sorted(moved.items())[:6])
        result.rules.append(("audit_evasion", f"work ran inside the evaluator's output copy: {shown}"))
    records = [(r, False) for t in tokens for r in calls.get(str(t), [])]
    records += [(r, True) for first, _ in replays for r in calls.get(f"graph:{first}", [])]
    # kernels PyTorch launched under an allowed operator in a host-launched call (a fill before an atomic sum): a
    # replay runs them with no operator above them, so their names alone do not make them compute
    allowed = {str(r.get("name", "")) for r, replayed in records if not replayed and r.get("kind") == "kernel"
               and STRICT_ALLOWED_OPS.match(str(r.get("op") or ""))}
    for record, replayed in records:
        if record.get("kind") == "op":
            op = str(record.get("name") or "")
            if strict and not STRICT_ALLOWED_OPS.match(op):
                forbidden[op] = forbidden.get(op, 0) + 1
            continue
        if record.get("kind") != "kernel":
            continue
        result.launches += 1
        name = str(record.get("name", ""))
        own = _normal(name) in own_full or (_base(name) in own_base and _base(name) != "")
        if own:
            result.own_launched += 1
        op = str(record.get("op") or "")
        if strict and op.startswith("aten::") and not STRICT_ALLOWED_OPS.match(op):
            # Rationale: strict mode forbids PyTorch compute; the launching operator, not the name, says it was
            # PyTorch's (cuBLAS under aten::mm is PyTorch's matmul; cuBLAS with no operator above it is the
            # solution's own C++).
            forbidden[f"{op} -> {name[:80]}"] = forbidden.get(f"{op} -> {name[:80]}", 0) + 1
        elif strict and not own and not op and kernel_origin(name) == "pytorch" and \
                not (replayed and name in allowed):
            forbidden[f"PyTorch kernel {name[:80]}"] = forbidden.get(f"PyTorch kernel {name[:80]}", 0) + 1
    if forbidden:
        shown = ", ".join(f"{k} x{n}" for k, n in sorted(forbidden.items())[:8])
        result.rules.append(("torch_compute_in_forward", f"PyTorch compute in forward: {shown}"))
    if own_kernels and not result.own_launched:
        # A note, not a rule: a solution may compile a fallback it never needs (cuBLAS did the work), and where the
        # work went elsewhere that is PyTorch compute (refused in strict mode above) or allowed (relaxed mode, as in
        # KernelBench). Compiled-but-unused kernels are worth telling the agent about.
        names = ", ".join(sorted(n for n in own_base if n)[:6])
        result.notes.append(f"none of the solution's compiled kernels ({names}) was launched by forward")
    return result


def breakdown(inventory: dict[str, Any], tokens: list[int],
              replays: Sequence[tuple[int, int]] = ()) -> tuple[dict[str, Any], ...]:
    """Per-kernel time of one call, averaged over ``tokens`` (the timed calls; those of replayed requests are
    recorded under their request's first call, ``replays``): rows of ``name``, ``total_us``, ``calls``."""
    calls = inventory.get("calls") if isinstance(inventory.get("calls"), dict) else {}
    replayed = {first for first, _ in replays}
    keys = [f"graph:{t}" if t in replayed else str(t) for t in tokens]
    totals: dict[str, list[float]] = {}
    for key in keys:
        for record in calls.get(key, []):
            if record.get("kind") != "kernel":
                continue
            entry = totals.setdefault(str(record.get("name", "?")), [0.0, 0.0])
            entry[0] += float(record.get("dur_us") or 0.0)
            entry[1] += 1
    n = max(1, len(tokens))
    rows = [{"name": name, "total_us": total / n, "calls": max(1, round(count / n))}
            for name, (total, count) in totals.items()]
    return tuple(sorted(rows, key=lambda r: r["total_us"], reverse=True))
