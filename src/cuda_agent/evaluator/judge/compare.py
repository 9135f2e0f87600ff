"""Trusted comparison of candidate outputs with reference outputs.

Why every torch function here is bound at import: the candidate runs in this process and could replace
``torch.allclose`` or a tensor method; this module is imported before any candidate code loads, and the evaluator
checks afterwards that none of these names (nor their dispatcher kernels) were replaced. Judging never calls a
method looked up on a candidate-provided object: outputs must be exactly ``torch.Tensor`` (no subclass) before any
arithmetic touches them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

_Tensor = torch.Tensor
_abs = torch.abs
_sub = torch.sub
_mul = torch.mul
_add = torch.add
_gt = torch.gt
_isfinite = torch.isfinite
_isnan = torch.isnan
_isposinf = torch.isposinf
_isneginf = torch.isneginf
_equal = torch.equal
_any = torch.any
_sum = torch.sum
_amax = torch.amax
_norm = torch.linalg.vector_norm
_logical_and = torch.logical_and
_logical_not = torch.logical_not
_where = torch.where
_zeros_like = torch.zeros_like
_type = type
_isinstance = isinstance
_float = float
_len = len
_item = torch.Tensor.item
_reshape = torch.reshape
_to = torch.Tensor.to
_tolist = torch.Tensor.tolist
_stack = torch.stack
_div = torch.div
_var_mean = torch.var_mean
_float64 = torch.float64
_float32 = torch.float32
_CHUNK = 1 << 26

TRUSTED_NAMES = (
    "torch.abs", "torch.sub", "torch.mul", "torch.add", "torch.gt", "torch.isfinite", "torch.isnan", "torch.isposinf",
    "torch.isneginf", "torch.equal", "torch.any", "torch.sum", "torch.amax", "torch.linalg.vector_norm",
    "torch.logical_and", "torch.logical_not", "torch.where", "torch.zeros_like", "torch.reshape", "torch.Tensor.item",
    "torch.Tensor.to", "torch.Tensor.tolist", "torch.stack", "torch.div", "torch.var_mean",
)
# The dispatcher ops these functions reach; a Python kernel registered over one of them is a patch.
TRUSTED_OPS = (
    "aten::abs", "aten::sub.Tensor", "aten::mul.Tensor", "aten::add.Tensor", "aten::gt.Tensor", "aten::gt.Scalar",
    "aten::isfinite", "aten::isnan", "aten::isposinf", "aten::isneginf", "aten::equal", "aten::any",
    "aten::sum", "aten::amax", "aten::linalg_vector_norm", "aten::logical_and", "aten::logical_not",
    "aten::where.self", "aten::zeros_like", "aten::reshape", "aten::view", "aten::_local_scalar_dense",
    "aten::_to_copy", "aten::copy_", "aten::clone", "aten::fill_.Scalar", "aten::empty.memory_format",
    "aten::empty_strided", "aten::eq.Tensor", "aten::ne.Tensor", "aten::as_strided", "aten::stack", "aten::cat",
    "aten::div.Tensor", "aten::add.Scalar", "aten::sub.Scalar", "aten::var_mean.correction",
)


@dataclass(frozen=True)
class LeafReport:
    """How one output leaf compares: ``ok`` under the tolerances, and the error measures."""

    path: str
    ok: bool
    reason: str = ""
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    signal_rel_error: float = 0.0
    reference_tiny: bool = False


@dataclass(frozen=True)
class Comparison:
    """The whole output: structure problems stop before any value is compared."""

    ok: bool
    reason: str
    leaves: tuple[LeafReport, ...] = ()
    lazy: bool = False

    @property
    def max_abs(self) -> float:
        return max((leaf.max_abs for leaf in self.leaves), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((leaf.max_rel for leaf in self.leaves), default=0.0)

    @property
    def signal_rel_error(self) -> float:
        return max((leaf.signal_rel_error for leaf in self.leaves), default=0.0)


def flatten(obj: Any, path: str = "out") -> list[tuple[str, Any]]:
    """Leaves of a (possibly nested) tuple/list output, with their paths; a leaf is anything else."""
    if _type(obj) in (tuple, list):
        leaves: list[tuple[str, Any]] = []
        for i, item in enumerate(obj):
            leaves.extend(flatten(item, f"{path}[{i}]"))
        return leaves
    return [(path, obj)]


def structure(obj: Any) -> Any:
    """The shape of the container tree (types and lengths), without values."""
    if _type(obj) in (tuple, list):
        return (_type(obj).__name__, tuple(structure(x) for x in obj))
    if _isinstance(obj, _Tensor):
        return "tensor"
    return _type(obj).__name__


def is_plain_tensor(value: Any) -> bool:
    """Exactly ``torch.Tensor``: not a subclass (which could compute lazily or lie about its values)."""
    return _type(value) is _Tensor


def _scalar(t: Any) -> float:
    return _float(_item(t))


def compare_tensor(path: str, cand: Any, ref: Any, atol: float, rtol: float) -> LeafReport:
    """Compare one tensor leaf: shape, dtype and device exactly, then values (NaN/Inf never pass where the reference
    is finite; where the reference is not finite the candidate must have the same kind of non-finite value)."""
    if not is_plain_tensor(cand):
        return LeafReport(path, False, f"{path} is a {_type(cand).__module__}.{_type(cand).__name__}, "
                                       "not a plain torch.Tensor")
    if tuple(cand.shape) != tuple(ref.shape):
        return LeafReport(path, False, f"{path} has shape {tuple(cand.shape)}, expected {tuple(ref.shape)}")
    if cand.dtype != ref.dtype:
        return LeafReport(path, False, f"{path} has dtype {cand.dtype}, expected {ref.dtype}")
    if cand.device != ref.device:
        return LeafReport(path, False, f"{path} is on {cand.device}, expected {ref.device}")
    if cand.numel() == 0:
        return LeafReport(path, True)
    if not (cand.dtype.is_floating_point or cand.dtype.is_complex):
        equal = _equal(cand, ref)
        mismatches = 0 if equal else int(_scalar(_sum(cand != ref)))
        return LeafReport(path, bool(equal), "" if equal else f"{path}: {mismatches} elements differ (exact dtype)",
                          mismatches=mismatches, max_abs=0.0 if equal else math.inf)
    c = _reshape(cand, (-1,))
    r = _reshape(ref, (-1,))
    # Bitwise-identical values (torch.equal is false wherever a NaN is) pass with zero error: one read of each.
    if _equal(c, r):
        return LeafReport(path, True)
    work = _float64 if ref.dtype == _float64 else _float32  # fp32 arithmetic for fp32/fp16/bf16: exact enough
    sums = _finite_sums(c, r, work, atol, rtol)
    if sums is None:  # a NaN or Inf somewhere (or a difference that overflows): the element-wise accounting
        sums = _exact_sums(c, r, work, atol, rtol)
    return _leaf_report(path, c.numel(), atol, rtol, **sums)


def _finite_sums(c: Any, r: Any, work: Any, atol: float, rtol: float) -> dict[str, float] | None:
    """The error measures in a few passes and one device read; None when a difference is not finite (NaN or Inf on
    either side, or an overflow), which the element-wise path then accounts for.

    Reductions run in the work dtype (a float64 accumulator would first copy the chunk). The reference's spread
    comes from per-chunk `var_mean` (Welford, stable) combined exactly on the host, so outputs near a constant, where
    ``sum(x^2) - n * mean^2`` cancels, still get their true variation."""
    n = c.numel()
    rows = []
    for start in range(0, n, _CHUNK):
        cc = _to(c[start:start + _CHUNK], work)
        rr = _to(r[start:start + _CHUNK], work)
        d = _sub(cc, rr)
        ad = _abs(d)
        ar = _abs(rr)
        outside = _sum(_gt(_sub(ad, ar, alpha=rtol), atol))  # |c - r| > atol + rtol * |r|
        rel = _div(ad, _add(ar, 1e-30 if work == _float32 else 1e-300))
        var, mean = _var_mean(rr, correction=0)
        rows.append(_stack([_to(x, _float64) for x in (outside, _norm(d), _amax(ad), _amax(rel), _amax(ar), mean, var)]))
        del cc, rr, d, ad, ar, rel
    table = _tolist(_stack(rows))
    sizes = [min(_CHUNK, n - start) for start in range(0, n, _CHUNK)]
    if not all(math.isfinite(row[1]) for row in table):
        return None
    mean = sum(k * row[5] for k, row in zip(sizes, table)) / n
    centred_sq = sum(k * (row[6] + (row[5] - mean) ** 2) for k, row in zip(sizes, table))
    return {"mismatches": int(sum(row[0] for row in table)), "err_sq": sum(row[1] ** 2 for row in table),
            "max_abs": max(row[2] for row in table), "max_rel": max(row[3] for row in table),
            "ref_abs_max": max(row[4] for row in table), "mean": mean, "centred_sq": centred_sq,
            "ref_sq": sum(k * (row[6] + row[5] ** 2) for k, row in zip(sizes, table)), "bad_nonfinite": 0}


def _exact_sums(c: Any, r: Any, work: Any, atol: float, rtol: float) -> dict[str, float]:
    """The error measures element by element, counting non-finite values that differ in kind from the reference's
    (NaN against a number, +Inf against -Inf, ...); finite measures over the elements finite on both sides."""
    n = c.numel()
    max_abs = max_rel = err_sq = ref_sq = ref_sum = ref_abs_max = 0.0
    mismatches = bad_nonfinite = 0
    for start in range(0, n, _CHUNK):
        cc = _to(c[start:start + _CHUNK], work)
        rr = _to(r[start:start + _CHUNK], work)
        r_fin = _isfinite(rr)
        c_fin = _isfinite(cc)
        both = _logical_and(r_fin, c_fin)
        bad_nonfinite += int(_scalar(_sum(_logical_and(r_fin, _logical_not(c_fin)))))
        bad_nonfinite += int(_scalar(_sum(_isnan(rr) != _isnan(cc))))
        bad_nonfinite += int(_scalar(_sum(_isposinf(rr) != _isposinf(cc))))
        bad_nonfinite += int(_scalar(_sum(_isneginf(rr) != _isneginf(cc))))
        zero = _zeros_like(rr)
        diff = _where(both, _abs(_sub(cc, rr)), zero)
        rabs = _where(both, _abs(rr), zero)
        allowed = _add(_mul(rabs, rtol), atol)
        mismatches += int(_scalar(_sum(_gt(diff, allowed))))
        if diff.numel():
            max_abs = max(max_abs, _scalar(_amax(diff)))
            rel = diff / _add(rabs, 1e-30 if work == _float32 else 1e-300)
            max_rel = max(max_rel, _scalar(_amax(rel)))
            ref_abs_max = max(ref_abs_max, _scalar(_amax(rabs)))
        err_sq += _scalar(_sum(_mul(diff, diff), dtype=_float64))
        ref_sq += _scalar(_sum(_mul(rabs, rabs), dtype=_float64))
        ref_sum += _scalar(_sum(_where(both, rr, zero), dtype=_float64))
    mean = ref_sum / n
    return {"mismatches": mismatches, "max_abs": max_abs, "max_rel": max_rel, "err_sq": err_sq, "ref_sq": ref_sq,
            "mean": mean, "centred_sq": max(0.0, ref_sq - n * mean * mean), "ref_abs_max": ref_abs_max,
            "bad_nonfinite": bad_nonfinite}


def _leaf_report(path: str, n: int, atol: float, rtol: float, *, mismatches: int, max_abs: float, max_rel: float,
                 err_sq: float, ref_sq: float, mean: float, centred_sq: float, ref_abs_max: float,
                 bad_nonfinite: int) -> LeafReport:
    signal = math.sqrt(centred_sq) if n > 1 and centred_sq > 1e-30 * max(ref_sq, 1e-300) else math.sqrt(ref_sq)
    err = math.sqrt(err_sq)
    signal_rel = err / signal if signal > 0 else (0.0 if err == 0 else math.inf)
    # A reference is "tiny" when a constant output equal to its mean would pass the tolerance check.
    tiny = ref_abs_max > 0 and ref_abs_max - abs(mean) <= atol + rtol * abs(mean)
    if bad_nonfinite:
        return LeafReport(path, False, f"{path}: {bad_nonfinite} NaN/Inf values where the reference differs",
                          max_abs=math.inf, max_rel=math.inf, mismatches=bad_nonfinite, signal_rel_error=math.inf,
                          reference_tiny=tiny)
    ok = mismatches == 0
    reason = "" if ok else (f"{path}: {mismatches}/{n} elements outside atol={atol:g}, rtol={rtol:g} "
                            f"(max abs error {max_abs:.3g}, max rel error {max_rel:.3g})")
    return LeafReport(path, ok, reason, max_abs, max_rel, mismatches, signal_rel, tiny)


def compare_outputs(cand: Any, ref: Any, tolerances: Callable[[str], tuple[float, float]]) -> Comparison:
    """Compare a candidate's whole output with the reference's. ``tolerances(dtype_name) -> (atol, rtol)``."""
    cand_leaves = flatten(cand)
    ref_leaves = flatten(ref)
    lazy = any(_isinstance(v, _Tensor) and not is_plain_tensor(v) for _, v in cand_leaves)
    if lazy:
        bad = next(p for p, v in cand_leaves if _isinstance(v, _Tensor) and not is_plain_tensor(v))
        return Comparison(False, f"{bad} is a tensor subclass; return plain torch.Tensor outputs", lazy=True)
    if structure(cand) != structure(ref):
        return Comparison(False, f"output structure {structure(cand)} differs from the reference's {structure(ref)}")
    reports: list[LeafReport] = []
    for (path, c), (_, r) in zip(cand_leaves, ref_leaves):
        if _isinstance(r, _Tensor):
            atol, rtol = tolerances(str(r.dtype).removeprefix("torch."))
            reports.append(compare_tensor(path, c, r, atol, rtol))
        elif _isinstance(r, (int, float, bool)) and _type(c) is _type(r):
            ok = (c == r) or (_isinstance(r, float) and math.isfinite(r) and abs(c - r) <= 1e-2 + 1e-2 * abs(r))
            reports.append(LeafReport(path, bool(ok), "" if ok else f"{path}: {c!r} != {r!r}"))
        else:
            ok = _type(c) is _type(r) and c == r
            reports.append(LeafReport(path, bool(ok), "" if ok else f"{path}: {c!r} != {r!r}"))
    failed = [leaf for leaf in reports if not leaf.ok]
    return Comparison(not failed, "; ".join(leaf.reason for leaf in failed[:3]), tuple(reports))


_FINGERPRINT_SAMPLES = 4096
_uint8 = torch.uint8
_INT_OF_WIDTH = {1: _uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def fingerprint(obj: Any) -> tuple[Any, ...] | None:
    """Evidence that two outputs are the same result, at a sliver of a copy's memory: per tensor leaf its shape,
    dtype, the sum of its raw bits and 4096 evenly spaced raw values; other leaves as they are. Equal fingerprints
    of real outputs mean equal outputs (a constant output matches itself, as a full comparison would say too).
    None when a leaf is a tensor that is not a plain one (nothing is read from it)."""
    parts: list[Any] = []
    for _, value in flatten(obj):
        if _type(value) is _Tensor:
            width = _INT_OF_WIDTH.get(value.element_size())
            flat = _reshape(value.contiguous(), (-1,))
            bits = flat.view(width) if width is not None else _reshape(flat.view(_uint8), (-1,))
            step = max(1, bits.numel() // _FINGERPRINT_SAMPLES)
            total = _scalar(_sum(bits)) if bits.numel() else 0.0
            parts.append((tuple(value.shape), str(value.dtype), total, tuple(_tolist(bits[::step]))))
        elif _isinstance(value, _Tensor):
            return None
        else:
            parts.append(value)
    return tuple(parts)


def tensors_equal(a: Any, b: Any) -> bool:
    """Bitwise equality of two plain tensors of the same shape and dtype (NaNs with equal bits are equal)."""
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    if a.dtype.is_floating_point:
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
        if width is not None:
            return bool(_equal(a.contiguous().view(width), b.contiguous().view(width)))
    return bool(_equal(a, b))
