"""The precision contract of an fp32 task, and the judge's check of it (rule ``lowered_precision``).

The contract. A task whose reference computes in float32 asks for a float32 computation. Let ``r64`` be the
reference run in float64 (inputs and parameters widened, TF32 off), ``r32`` the reference in float32 (TF32 off) and
``err(y) = ‖y − r64‖₂ / ‖r64‖₂`` over one output tensor. On every call the judge keeps for this check, both on the
task's own inputs and on zero-mean inputs (the same inputs re-centred, `plan_zero_mean`), each floating output must
satisfy both rules:

1. magnitude: ``err(candidate) <= max(MAGNITUDE_RATIO * err(r32), floor)`` with ``u = 2**-24`` (the fp32 rounding
   unit): 16 times the fp32 reference's own error, and never less than the task's floor: ``2 * sqrt(depth)`` units
   within [64, 512] (3.05e-5), where ``depth`` is the most terms the reference sums into one output element
   (`judge.depth`), and 512 wherever the reference contracts (matrix products, convolutions, attention: their fast
   honest algorithms err more than a direct sum) or the depth is unknown. Elementwise tasks get 64: honest fp32
   formulas there stay within 5 units, and 512 admitted a tanh good to 12 bits (the hardware's tanh.approx.f32, what
   -use_fast_math makes of tanhf, passed L1/88 on the H200). For the long sums, any fp32
   computation, in any summation order (split-K, atomics, a different tree, Kahan, float64 accumulation, fused
   epilogues, folded weights), stays within a few times the reference's error, and below 512 units up to
   reductions of about half a million terms summed one after another into one accumulator (measured: 45 units on
   positive and 121 on zero-mean data for 65,536, 48 times torch's pairwise sum's error: hence the floor; the error
   grows as the square root of the count); operands rounded to 10 mantissa bits (TF32, fp16)
   or 7 (bf16) cost about 2.9e-4 (4,900 units) and 2.3e-3 on zero-mean data, whatever the reduction's length.
2. operand-rounding signature (on the first kept call on the task's own inputs): the candidate's error must not
   contain the error of the reference computed (in float64) on inputs and parameters rounded to a lower format. For
   TF32/fp16 (10 mantissa bits) and bf16 (7), rounded to nearest, the judge computes that error ``d`` and fires
   where, over at least `SIGNATURE_MIN_ELEMENTS` outputs, the candidate's error ``e`` correlates with ``d``
   (``<e,d>/(‖e‖‖d‖) >= 0.5``) at full strength (the slope ``<e,d>/‖d‖²`` between 0.25 and 4). Why: on
   all-positive data (``torch.rand``, KernelBench's matmuls) the rounding errors of many products average out while
   an fp32 sum's error grows with its length, so at K = 4096 a TF32 GEMM's error (88 units) is only 6 times an
   honest fp32 kernel's with one accumulator per output (14 units), and near K = 16384 the two are as large; no
   threshold on the size of the error separates them there, but a TF32 result's error
   *is* the operands' rounding error, which no fp32 computation's is (its errors do not depend on the 13 mantissa
   bits TF32 drops). The slope keeps an fp32 error that merely resembles the rounding error's shape (measured:
   correlation up to 0.42 for an fp32 GELU against truncation's error) from firing: its slope is near 0. Truncated
   operands need no signature: their bias does not average out (10,900 units and more, rule 1); zero-mean calls
   need none either (rule 1 alone refuses every lowered format there, by 8 times the floor or more).

Where the reference is undefined on signed inputs (log, sqrt, pow with a fractional exponent, anything whose float32
output is not finite once an input is re-centred), `plan_zero_mean` leaves that input as the task makes it and says
so in its note; where no input can be re-centred, precision is judged on the task's own inputs only (both rules
still apply: the signature does not need signed data). Integer and boolean inputs (indices, masks) are never
changed. Outputs whose reference is not float32, or not finite in float64, are not judged.

Known limit: a candidate that recognises the zero-mean calls (a negative input) and computes in fp32 there, and on
its own all-positive inputs rounds its operands in a way that matches neither format (random dithering, a
rescaling before the rounding), is judged there by the magnitude rule alone, which admits up to the floor: a
dithered-TF32 GEMM on ``torch.rand`` at K = 4096 measures 126 units and passes on those inputs. So do outputs under
`SIGNATURE_MIN_ELEMENTS` (reductions to a few values, losses): a bf16 sum of 65,536 positive terms measures 115.
The other way: one fp32 accumulator over more than about half a million terms (an atomicAdd per element into one
address) can exceed the floor: extrapolated from 45 units at 65,536 positive terms as the square root of the count,
about 5,800 units over KernelBench L1/94's 10^9 terms (the old probe's 1e-4 floor refused that too; between 8 and
90 million terms only this floor refuses it). Partial sums per thread or per block first, as any fast kernel does,
keep the error far below the floor.

Measured: ``benchmarks/precision_contract.py`` (CPU emulation, and real TF32/fp16/bf16 on a GPU) prints every
variant's error in fp32 units, its ratio to the reference's and the signature's correlation and slope.
"""
from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Sequence

import torch

from cuda_agent.evaluator.judge import compare
from cuda_agent.evaluator.judge.depth import Depth, accumulation_depth

RULE = "lowered_precision"
FP32_UNIT = 2.0 ** -24            # the fp32 rounding unit (half an ulp of 1.0)
MAGNITUDE_RATIO = 16.0            # the candidate's error at most this many times the fp32 reference's ...
FLOOR_UNITS = 512.0               # ... or the floor, whichever is larger: at most this many fp32 units ...
FLOOR_PER_SQRT_TERM = 2.0         # ... this many times the square root of the task's accumulation depth ...
MIN_FLOOR_UNITS = 64.0            # ... and never less than this (elementwise tasks)
SIGNATURE_MIN_CORR = 0.5          # correlation of the candidate's error with a format's rounding error ...
SIGNATURE_SLOPE = (0.25, 4.0)     # ... at full strength (the candidate carries that error, not a trace of it) ...
SIGNATURE_MIN_ELEMENTS = 1024     # ... over enough outputs that chance correlation stays below 0.13 (4 sigma)
SIGNATURE_CALLS = 1               # calls on the task's own inputs the signature is computed on (zero-mean: magnitude)
MIN_CENTRED_ELEMENTS = 16         # smaller floating inputs (scalars, tiny vectors) are left as they are
_CHUNK = 1 << 24

Rounding = Literal["nearest", "truncate"]


@dataclass(frozen=True)
class LowFormat:
    """A lower format an fp32 computation might round its operands to: ``bits`` explicit mantissa bits."""

    name: str
    bits: int
    rounding: Rounding


# Truncation needs no signature: it shrinks every operand by about 0.7 of a unit of its last kept bit, a bias that no
# sum averages out (measured at 10,900 fp32 units and more on positive and zero-mean data, far above the floor).
FORMATS = (
    LowFormat("tf32/fp16, round to nearest", 10, "nearest"),
    LowFormat("bf16, round to nearest", 7, "nearest"),
)


@dataclass(frozen=True)
class PrecisionContract:
    """The contract's constants (see the module docstring); the defaults are the judge's."""

    ratio: float = MAGNITUDE_RATIO
    floor_units: float = FLOOR_UNITS
    per_sqrt_term: float = FLOOR_PER_SQRT_TERM
    min_floor_units: float = MIN_FLOOR_UNITS
    signature: bool = True
    min_corr: float = SIGNATURE_MIN_CORR
    slope: tuple[float, float] = SIGNATURE_SLOPE
    min_elements: int = SIGNATURE_MIN_ELEMENTS
    signature_calls: int = SIGNATURE_CALLS
    formats: tuple[LowFormat, ...] = FORMATS

    @property
    def floor(self) -> float:
        """The floor where the task's accumulation depth is unknown or it contracts (the largest floor)."""
        return self.floor_units * FP32_UNIT

    def floor_for(self, depth: Depth | None) -> float:
        """The floor for a task of accumulation depth ``depth`` (`judge.depth`): ``per_sqrt_term * sqrt(terms)``
        fp32 units within [min_floor_units, floor_units]; the largest where the depth is unknown or the task has a
        matrix product, convolution or attention (fast honest algorithms for those err more than a direct sum)."""
        if depth is None or depth.terms is None or depth.contraction:
            return self.floor
        units = min(self.floor_units, max(self.min_floor_units, self.per_sqrt_term * math.sqrt(depth.terms)))
        return units * FP32_UNIT

    def bound(self, ref_error: float, depth: Depth | None = None) -> float:
        return max(self.ratio * ref_error, self.floor_for(depth))


CONTRACT = PrecisionContract()


@dataclass(frozen=True)
class Signature:
    """How the candidate's error relates to one format's rounding error on the same call and output."""

    format: str
    corr: float
    slope: float

    def matches(self, contract: PrecisionContract) -> bool:
        return self.corr >= contract.min_corr and contract.slope[0] <= self.slope <= contract.slope[1]


@dataclass(frozen=True)
class OutputError:
    """One output of one kept call: errors against float64 (relative, Frobenius), the bound, what fired."""

    call: str
    output: int
    elements: int
    cand_error: float
    ref_error: float
    bound: float
    signatures: tuple[Signature, ...] = ()
    fired: str = ""                       # "", "magnitude" or "signature: <format>"

    @property
    def ratio(self) -> float:
        return self.cand_error / self.ref_error if self.ref_error > 0 else math.inf if self.cand_error else 0.0

    @property
    def units(self) -> float:
        return self.cand_error / FP32_UNIT


@dataclass(frozen=True)
class PrecisionVerdict:
    """``ok``: no output broke the contract. ``checked``: the check ran on at least one output (it cannot where the
    reference has no float64 kernel, or nothing was kept). ``violations``: one line per broken output, for rule
    `RULE`. ``errors``: every judged output."""

    ok: bool
    checked: bool
    violations: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    errors: tuple[OutputError, ...] = ()


Call = tuple[Sequence[Any], Sequence[torch.Tensor]]
NOTHING_KEPT = PrecisionVerdict(True, False, notes=("precision not checked: no call was kept",))


# -- lower formats ----------------------------------------------------------------------------------------------------
def round_mantissa(t: torch.Tensor, bits: int, rounding: Rounding = "nearest") -> torch.Tensor:
    """A float32 copy of ``t`` with its mantissa kept to ``bits`` explicit bits (of 23), rounded to nearest (ties to
    even, as fp16/bf16 conversions do) or truncated toward zero; the exponent range stays fp32's, non-finite values
    are kept. Raises ``ValueError`` for a tensor that is not float32 or bits outside 1..22."""
    if t.dtype != torch.float32:
        raise ValueError(f"round_mantissa takes float32, got {t.dtype}")
    if not 1 <= bits <= 22:
        raise ValueError(f"bits must be within 1..22, got {bits}")
    drop = 23 - bits
    raw = t.contiguous().view(torch.int32)
    if rounding == "nearest":
        raw = raw + ((1 << (drop - 1)) - 1) + ((raw >> drop) & 1)
    out = (raw & ~((1 << drop) - 1)).view(torch.float32)
    return torch.where(torch.isfinite(t), out, t)


def _rounded_model(model: torch.nn.Module, fmt: LowFormat) -> torch.nn.Module:
    """A float64 copy of ``model`` whose float32 parameters and buffers were first rounded to ``fmt``."""
    low = copy.deepcopy(model)
    with torch.no_grad():
        for tensor in [*low.parameters(), *low.buffers()]:
            if tensor.dtype == torch.float32:
                tensor.copy_(round_mantissa(tensor, fmt.bits, fmt.rounding))
    return low.double()


@contextlib.contextmanager
def exact_fp32() -> Iterator[None]:
    """TF32 off for matrix products and convolutions inside the block: the judge's references, baselines and checks
    of fp32 tasks (the precision contract is an fp32 one)."""
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def widen(inputs: Sequence[Any], device: torch.device, fmt: LowFormat | None = None) -> list[Any]:
    """``inputs`` on ``device`` with floating tensors in float64 (fp32 ones first rounded to ``fmt``, if given)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if x.dtype == torch.float32 and fmt is not None:
                x = round_mantissa(x, fmt.bits, fmt.rounding)
            if x.dtype.is_floating_point:
                x = x.double()
        out.append(x)
    return out


# -- zero-mean inputs -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ZeroMeanPlan:
    """Which inputs the zero-mean calls re-centre (each tensor less its own mean), decided once per task."""

    centred: tuple[int, ...]
    note: str = ""

    def apply(self, inputs: Sequence[Any]) -> list[Any] | None:
        """``inputs`` with the planned tensors re-centred; None where the plan centres nothing."""
        if not self.centred:
            return None
        return centred(inputs, self.centred)


def centred(inputs: Sequence[Any], indices: Sequence[int]) -> list[Any]:
    """The inputs at ``indices`` (floating tensors only; anything else is left alone) less their own mean."""
    out = list(inputs)
    for i in indices:
        x = out[i]
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
            out[i] = x - x.mean(dtype=torch.float64).to(x.dtype)
    return out


def _finite(model: torch.nn.Module, inputs: Sequence[Any]) -> bool:
    try:
        with torch.no_grad():
            leaves = compare.flatten(model(*inputs))
    except Exception:  # noqa: BLE001 - a reference that refuses signed inputs is undefined there
        return False
    return all(bool(torch.isfinite(v).all()) for _, v in leaves
               if isinstance(v, torch.Tensor) and v.dtype.is_floating_point)


def plan_zero_mean(ref_model: torch.nn.Module, inputs: Sequence[Any]) -> ZeroMeanPlan:
    """Which of ``inputs``' floating tensors (at least `MIN_CENTRED_ELEMENTS` elements) can be re-centred with the
    reference still finite: all of them where it stays finite, else those that keep it finite when added one at a
    time. Integer and boolean tensors (indices, masks) and non-tensors are never touched."""
    floating = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.dtype.is_floating_point
                and x.numel() >= MIN_CENTRED_ELEMENTS]
    if not floating:
        return ZeroMeanPlan((), "zero-mean check skipped: the task has no floating input to re-centre; precision is "
                                "judged on its own inputs only")
    if _finite(ref_model, centred(inputs, floating)):
        return ZeroMeanPlan(tuple(floating))
    kept: list[int] = []
    for i in floating:
        if _finite(ref_model, centred(inputs, [*kept, i])):
            kept.append(i)
    left = [i for i in floating if i not in kept]
    why = ("the reference is not finite on signed values of input(s) " + ", ".join(str(i) for i in left) +
           " (log, sqrt, a fractional power...)")
    if not kept:
        return ZeroMeanPlan((), f"zero-mean check skipped: {why}; precision is judged on the task's own inputs only")
    return ZeroMeanPlan(tuple(kept), f"zero-mean check re-centres input(s) {', '.join(map(str, kept))} only: {why}, "
                                     "which keep the task's own values")


# -- the check --------------------------------------------------------------------------------------------------------
def judge_precision(ref_model: torch.nn.Module, kept: Sequence[Call], zero_mean: Sequence[Call] | None,
                    device: torch.device, *, contract: PrecisionContract = CONTRACT,
                    depth: Depth | None = None, labels: Sequence[str] | None = None) -> PrecisionVerdict:
    """Check the contract on the candidate's calls.

    ``ref_model``: the task's reference in float32, on ``device`` (not modified: float64 and rounded copies are
    made). ``kept``: calls on the task's own inputs, ``zero_mean``: calls on `ZeroMeanPlan.apply`'d inputs; each a
    pair (inputs as the candidate got them, the candidate's tensor outputs in the order of the reference's tensor
    leaves), on ``device`` or on the host. The caller decides that the task is fp32 and fires `RULE` with each of
    ``violations``. Cost: a float32 and a float64 forward per call, and two more float64 forwards (on rounded copies
    of the inputs and the model) for the signature. ``depth``: the task's accumulation depth, which sets the floor
    (`PrecisionContract.floor_for`); None traces it here, on the first call's inputs (the judge traces it once,
    before any candidate code loads). ``labels``: the calls' names in the verdict, in order (default "own call i",
    "zero-mean call i"). Raises nothing: a reference with no float64 kernel gives ``checked=False`` and a note."""
    calls = [(f"own call {i}", c, "own") for i, c in enumerate(kept)] + \
            [(f"zero-mean call {i}", c, "zero") for i, c in enumerate(zero_mean or ())]
    if labels:
        calls = [(labels[i] if i < len(labels) else name, c, kind) for i, (name, c, kind) in enumerate(calls)]
    if not calls:
        return NOTHING_KEPT
    notes: list[str] = []
    if depth is None:
        first = [x.to(device) if isinstance(x, torch.Tensor) else x for x in calls[0][1][0]]
        depth = accumulation_depth(ref_model, first)
    try:
        with exact_fp32():
            errors = _judge_calls(ref_model, calls, device, contract, notes, depth)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        return PrecisionVerdict(True, False, notes=(f"precision not checked: the reference does not run in float64 "
                                                    f"({exc})"[:300],))
    violations = tuple(_describe(e, contract, depth) for e in errors if e.fired)
    return PrecisionVerdict(not violations, bool(errors), violations, tuple(dict.fromkeys(notes)), tuple(errors))


def _judge_calls(ref_model: torch.nn.Module, calls: list[tuple[str, Call, str]], device: torch.device,
                 contract: PrecisionContract, notes: list[str], depth: Depth | None) -> list[OutputError]:
    """Every output of every call under the magnitude rule, and the first own calls' under the signature too."""
    errors: list[OutputError] = []
    ref64 = copy.deepcopy(ref_model).double()
    signed = 0
    for label, (inputs, outputs), kind in calls:
        found, out64 = _judge_call(ref_model, ref64, label, inputs, outputs, device, contract, notes, depth)
        if contract.signature and kind == "own" and signed < contract.signature_calls and \
                not any(e.fired for e in found):
            signed += 1
            found = _with_signatures(ref_model, inputs, outputs, out64, found, device, contract, notes)
        del out64
        errors.extend(found)
    return errors


def _tensor_leaves(obj: Any) -> list[torch.Tensor]:
    return [v for _, v in compare.flatten(obj) if isinstance(v, torch.Tensor)]


def _judge_call(ref_model: torch.nn.Module, ref64: torch.nn.Module, label: str, inputs: Sequence[Any],
                outputs: Sequence[torch.Tensor], device: torch.device, contract: PrecisionContract,
                notes: list[str], depth: Depth | None) -> tuple[list[OutputError], list[torch.Tensor]]:
    """The magnitude rule on one call's outputs; also the float64 reference's outputs (for the signature)."""
    on_device = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        out32 = _tensor_leaves(ref_model(*on_device))
        out64 = _tensor_leaves(ref64(*widen(inputs, device)))
    found = []
    for k, (cand, r32, r64) in enumerate(zip(outputs, out32, out64)):
        if r32.dtype != torch.float32 or not r64.numel():
            continue
        if not bool(torch.isfinite(r64).all()):
            notes.append(f"output {k}: not judged for precision where its float64 reference is not finite")
            continue
        if not bool(r64.any()):
            notes.append(f"output {k}: not judged for precision where its float64 reference is all zeros")
            continue
        e_ref, e_cand = rel_error(r32, r64), rel_error(cand.to(device), r64)
        if not math.isfinite(e_ref):
            notes.append(f"output {k}: not judged for precision where the fp32 reference overflows")
            continue
        bound = contract.bound(e_ref, depth)
        found.append(OutputError(label, k, r64.numel(), e_cand, e_ref, bound,
                                 fired="magnitude" if not e_cand <= bound else ""))
    return found, out64


def _with_signatures(ref_model: torch.nn.Module, inputs: Sequence[Any], outputs: Sequence[torch.Tensor],
                     out64: list[torch.Tensor], found: list[OutputError], device: torch.device,
                     contract: PrecisionContract, notes: list[str]) -> list[OutputError]:
    """The operand-rounding signature rule on one call: the reference in float64 on inputs and parameters rounded to
    each lower format, and the candidate's error projected on the error that rounding makes."""
    judged = {e.output: e for e in found if e.elements >= contract.min_elements}
    if not judged:
        if found:
            notes.append(f"operand-rounding signature skipped: outputs under {contract.min_elements} elements")
        return found
    signatures: dict[int, list[Signature]] = {k: [] for k in judged}
    for fmt in contract.formats:
        low = _rounded_model(ref_model, fmt)
        with torch.no_grad():
            low64 = _tensor_leaves(low(*widen(inputs, device, fmt)))
        del low
        for k in judged:
            sig = signature(outputs[k].to(device), out64[k], low64[k], fmt.name)
            if sig is not None:
                signatures[k].append(sig)
        del low64
    result = []
    for e in found:
        sigs = tuple(signatures.get(e.output, ()))
        hit = next((s for s in sigs if s.matches(contract)), None)
        result.append(OutputError(e.call, e.output, e.elements, e.cand_error, e.ref_error, e.bound, sigs,
                                  f"signature: {hit.format}" if hit else e.fired))
    return result


def merge_verdicts(verdicts: Sequence[PrecisionVerdict]) -> PrecisionVerdict:
    """One verdict for calls judged apart (some at once during the run, the rest after it)."""
    if not verdicts:
        return NOTHING_KEPT
    return PrecisionVerdict(ok=all(v.ok for v in verdicts), checked=any(v.checked for v in verdicts),
                            violations=tuple(x for v in verdicts for x in v.violations),
                            notes=tuple(dict.fromkeys(n for v in verdicts for n in v.notes)),
                            errors=tuple(e for v in verdicts for e in v.errors))


def margins(verdict: PrecisionVerdict) -> dict[str, Any]:
    """How close a verdict's outputs came to the contract, for the result's diagnostics (``extra["precision"]``):
    the worst error in fp32 units, its share of its bound (``probe_headroom``: 1.0 is the bound; an honest kernel
    near it is a false refusal waiting to happen), and the strongest operand-rounding signature (correlation and
    slope; `Signature.matches` says when it fires). Empty where nothing was judged."""
    if not verdict.errors:
        return {}
    worst = max(verdict.errors, key=lambda e: e.cand_error / e.bound if e.bound > 0 else math.inf)
    out: dict[str, Any] = {"probe_outputs": len(verdict.errors), "probe_worst_units": worst.units,
                           "probe_bound_units": worst.bound / FP32_UNIT,
                           "probe_headroom": worst.cand_error / worst.bound if worst.bound > 0 else None,
                           "probe_worst_call": worst.call}
    sigs = [s for e in verdict.errors for s in e.signatures]
    if sigs:
        top = max(sigs, key=lambda s: s.corr)
        out.update(signature_format=top.format, signature_corr=top.corr, signature_slope=top.slope)
    return out


def _describe(e: OutputError, contract: PrecisionContract, depth: Depth | None) -> str:
    head = f"{e.call}, output {e.output}: relative error vs float64 {e.cand_error:.2e} ({e.units:.0f} fp32 units)"
    if e.fired == "magnitude":
        floor = contract.floor_for(depth) / FP32_UNIT
        why = "" if depth is None else f", for {depth.describe()}"
        return (f"{head}, above the bound {e.bound:.2e} (the larger of {contract.ratio:g} x the fp32 reference's "
                f"{e.ref_error:.2e} and {floor:.0f} units{why})")
    sig = next(s for s in e.signatures if e.fired.endswith(s.format))
    return (f"{head} is the rounding error of {sig.format} operands (correlation {sig.corr:.2f}, slope "
            f"{sig.slope:.2f}); the fp32 reference's is {e.ref_error:.2e}")


# -- error measures (float64, in chunks: a float64 copy of a 7 GiB output would be 14 GiB) -----------------------------
def rel_error(a: torch.Tensor, ref64: torch.Tensor) -> float:
    """‖a − ref64‖ / ‖ref64‖ in float64 (0 where both are 0, inf where only the error is not), in chunks (a float64
    copy of a 7 GiB output would be 14 GiB), summed on the tensors' device and read once. ``ref64`` may be of any
    floating dtype (the judge's per-call check passes the fp32 reference)."""
    flat_a, flat_r = a.reshape(-1), ref64.reshape(-1)
    diff_sq = torch.zeros((), dtype=torch.float64, device=flat_r.device)
    scale_sq = torch.zeros((), dtype=torch.float64, device=flat_r.device)
    if flat_a.dtype == flat_r.dtype == torch.float32 and flat_a.device == flat_r.device:
        # both float32 (the per-call check): the difference of two close float32 values is exact in float32
        # (Sterbenz), and otherwise rounded to 2^-24 of itself; squares summed in float64. About half the memory
        # traffic of widening both (the 6 GiB level-1 tasks: 1.05 s of a 3.2 s calls phase, H200, 2026-12-04).
        for start in range(0, flat_r.numel(), _CHUNK):
            r = flat_r[start:start + _CHUNK]
            d = flat_a[start:start + _CHUNK] - r
            diff_sq += torch.sum(d.square(), dtype=torch.float64)
            scale_sq += torch.sum(r.square(), dtype=torch.float64)
    else:
        for start in range(0, flat_r.numel(), _CHUNK):
            r = flat_r[start:start + _CHUNK].double()
            d = flat_a[start:start + _CHUNK].to(r.device).double() - r
            diff_sq += torch.dot(d, d)
            scale_sq += torch.dot(r, r)
    diff, scale = math.sqrt(float(diff_sq)), math.sqrt(float(scale_sq))
    return diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)


def signature(cand: torch.Tensor, ref64: torch.Tensor, low64: torch.Tensor, name: str) -> Signature | None:
    """Correlation and slope of the candidate's error ``cand − ref64`` against a format's rounding error
    ``low64 − ref64``; None where either is zero or not finite."""
    ee = dd = ed = 0.0
    flat_c, flat_r, flat_l = cand.reshape(-1), ref64.reshape(-1), low64.reshape(-1)
    for start in range(0, flat_r.numel(), _CHUNK):
        r = flat_r[start:start + _CHUNK]
        e = flat_c[start:start + _CHUNK].double() - r
        d = flat_l[start:start + _CHUNK] - r
        ee += float((e * e).sum())
        dd += float((d * d).sum())
        ed += float((e * d).sum())
    if not (ee > 0 and dd > 0 and math.isfinite(ee) and math.isfinite(dd)):
        return None
    return Signature(name, ed / math.sqrt(ee * dd), ed / dd)
