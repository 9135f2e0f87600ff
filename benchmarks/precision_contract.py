"""The precision contract measured: every task and variant of tests/evaluator/precision_variants.py judged by
`cuda_agent.evaluator.judge.precision.judge_precision`, one line each: the candidate's error against float64 in fp32
units (own inputs, zero-mean inputs), its ratio to the fp32 reference's error, the strongest operand-rounding
signature (correlation, slope), and the verdict. On a GPU (``--device cuda``) the lowered variants also run on real
hardware: TF32 through cuBLAS/cuDNN, fp16 and bf16 matmuls.

    PYTHONPATH=src python benchmarks/precision_contract.py [--device cpu|cuda] [--quick] [--json out.json]

Writes benchmarks/results/precision_contract_<device>.json: the contract's constants, counts (honest refused,
lowered accepted, verdict flips) and the margins that justify the constants (largest honest error in fp32 units
and ratio to the reference's, smallest lowered error on zero-mean inputs, largest honest signature correlation,
smallest lowered one where the signature decided); every row under ``details``. Exit status 1 when an honest variant
is refused, a lowered one (fixed rounding) is accepted, or a verdict flips.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "evaluator"))

from benchmarks_io import write_result  # noqa: E402
from cuda_agent.evaluator.judge.precision import (CONTRACT, FP32_UNIT, PrecisionVerdict, exact_fp32,  # noqa: E402
                                                  judge_precision)
from precision_variants import (Task, Variant, conv_task, draw, gemm_task, hardware_variants,  # noqa: E402
                                linear_task, reduction_task, shortcut_task, unary_task,
                                variants_for)


def tasks(device: str, quick: bool) -> list[Task]:
    sizes = [(256, 1024, 256), (128, 4096, 128)] if quick else \
        [(64, 64, 64), (256, 1024, 256), (128, 4096, 128), (32, 16384, 32)]
    if device == "cuda" and not quick:
        sizes += [(1024, 4096, 1024)]
    out = [gemm_task(m, k, n, positive, device) for m, k, n in sizes for positive in (True, False)]
    if device == "cuda":  # cuDNN computes the small conv below in fp32 even with TF32 allowed; this one in TF32
        out += [conv_task(True, device, 128, 8), conv_task(False, device, 128, 8)]
    out += [conv_task(True, device), conv_task(False, device), linear_task(True, device), linear_task(False, device),
            shortcut_task(device), reduction_task(device=device)]
    out += [unary_task(op, True, device=device) for op in ("gelu", "exp", "log", "tanh", "gelu_tanh")]
    out += [unary_task(op, False, device=device) for op in ("tanh", "gelu_tanh")]
    return out


def judge(task: Task, variant: Variant, seed: int, device: str) -> dict[str, Any]:
    d, dev = draw(task, variant, seed, device), torch.device(device)
    zero = [d.zero] if d.zero is not None else None
    verdicts = {
        "own": judge_precision(d.model, [d.own], None, dev),
        "zero": judge_precision(d.model, [], zero, dev) if zero else None,
        "contract": judge_precision(d.model, [d.own], zero, dev),
    }
    return {"task": task.name, "variant": variant.name, "honest": variant.honest, "exact": variant.exact_format,
            "plan_note": d.plan.note, "not_lowered": variant.name.startswith("GPU:") and _same_as_fp32(d),
            **{k: _summary(v) for k, v in verdicts.items()}}


def _same_as_fp32(d: Any) -> bool:
    """A hardware variant whose outputs are the fp32 computation's, bit for bit: the library chose an fp32 kernel
    although TF32 was allowed (seen on the H200, 2026-12-04: cuDNN on a conv of 16 channels), so there is no lowered
    precision to refuse. Rationale: counting it as a lowered variant accepted would report a hole that is not one."""
    inputs, outputs = d.own
    with torch.no_grad(), exact_fp32():
        fp32 = d.model(*inputs)
    fp32 = fp32 if isinstance(fp32, (list, tuple)) else [fp32]
    return len(fp32) == len(outputs) and all(torch.is_tensor(a) and torch.is_tensor(b) and a.dtype == b.dtype and
                                             torch.equal(a, b) for a, b in zip(fp32, outputs))


def _summary(v: PrecisionVerdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    worst = max(v.errors, key=lambda e: e.cand_error / max(e.bound, 1e-300), default=None)
    sig = max((s for e in v.errors for s in e.signatures), key=lambda s: s.corr, default=None)
    return {"ok": v.ok, "units": worst.units if worst else 0.0, "ref_units": worst.ref_error / FP32_UNIT if worst else 0,
            "ratio": worst.ratio if worst else 0.0, "bound_units": worst.bound / FP32_UNIT if worst else 0.0,
            "fired": sorted({e.fired.split(":")[0] for e in v.errors if e.fired}),
            "sig": None if sig is None else [sig.format, round(sig.corr, 3), round(sig.slope, 3)],
            "max_units": max((e.units for e in v.errors), default=0.0),
            "max_ratio": max((e.ratio for e in v.errors if math.isfinite(e.ratio)), default=0.0)}


def _cell(s: dict[str, Any] | None) -> str:
    if s is None:
        return f"{'-':>30}"
    mark = "ok " if s["ok"] else "NO "
    return f"{mark}{s['units']:9.1f}u /{s['ref_units']:7.1f}u x{s['ratio']:7.1f}"


def _metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    honest = [r for r in rows if r["honest"]]
    lowered = [r for r in rows if not r["honest"] and r["exact"] and not r.get("not_lowered")]
    judged = [r[k] for r in honest for k in ("own", "zero") if r[k] is not None]
    signed_lowered = [r["own"]["sig"][1] for r in lowered if r["own"]["sig"] and "signature" in r["own"]["fired"]]
    # tasks whose floor the accumulation depth lowered (elementwise tasks, short reductions): the margins around it
    tight = lambda r: r["own"]["bound_units"] < CONTRACT.floor_units  # noqa: E731
    return {
        "magnitude_ratio": CONTRACT.ratio, "floor_units": CONTRACT.floor_units, "signature_min_corr": CONTRACT.min_corr,
        "min_floor_units": CONTRACT.min_floor_units, "floor_per_sqrt_term": CONTRACT.per_sqrt_term,
        "lowered_floor_honest_max_units": max((s["max_units"] for r in honest if tight(r)
                                               for s in (r["own"], r["zero"]) if s is not None), default=0.0),
        "lowered_floor_lowered_min_units": min((r["contract"]["max_units"] for r in rows
                                                if not r["honest"] and tight(r)), default=0.0),
        "honest_total": len(honest), "honest_refused": sum(not r["contract"]["ok"] for r in honest),
        "lowered_total": len(lowered), "lowered_accepted": sum(r["contract"]["ok"] for r in lowered),
        "verdict_flips": sum(r["flip"] for r in rows),
        "hardware_not_lowered": sum(bool(r.get("not_lowered")) for r in rows),
        "honest_max_units": max((s["max_units"] for s in judged), default=0.0),
        "honest_max_ratio": max((s["max_ratio"] for s in judged), default=0.0),
        "honest_max_corr": max((r["own"]["sig"][1] for r in honest if r["own"]["sig"]), default=0.0),
        "lowered_min_zero_mean_units": min((r["zero"]["units"] for r in lowered if r["zero"]), default=0.0),
        "lowered_min_signature_corr": min(signed_lowered, default=0.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--quick", action="store_true", help="fewer GEMM sizes")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    rows, bad = [], []
    print(f"contract: bound = max({CONTRACT.ratio:g} x e_ref, floor), floor = {CONTRACT.per_sqrt_term:g} x sqrt(depth) "
          f"within [{CONTRACT.min_floor_units:g}, {CONTRACT.floor_units:g}] u ({CONTRACT.floor_units:g} u with a "
          f"contraction or an unknown depth), u = 2^-24; signature: "
          f"corr >= {CONTRACT.min_corr}, slope in {CONTRACT.slope}, >= {CONTRACT.min_elements} elements")
    print(f"{'task':34} {'variant':30} {'own inputs: e_cand / e_ref':>30} {'zero-mean inputs':>30}  "
          f"{'best signature (own)':34} verdict")
    for task in tasks(args.device, args.quick):
        gen = torch.Generator().manual_seed(7)
        variants = variants_for(task, gen) + (hardware_variants(task) if args.device == "cuda" else [])
        for variant in variants:
            verdicts = [judge(task, variant, seed, args.device) for seed in (1, 2)]
            row = verdicts[0]
            flip = verdicts[0]["contract"]["ok"] != verdicts[1]["contract"]["ok"]
            sig = row["own"]["sig"]
            sig_s = f"{sig[0][:22]:22} {sig[1]:5.2f} {sig[2]:5.2f}" if sig else "-"
            ok = row["contract"]["ok"]
            verdict = ("accepted" if ok else "refused " + "+".join(row["contract"]["fired"])) + (" FLIP" if flip else "")
            if row["not_lowered"]:
                verdict += " (the hardware computed it in fp32: not counted as lowered)"
            print(f"{task.name:34} {variant.name:30} {_cell(row['own'])} {_cell(row['zero'])}  {sig_s:34} {verdict}")
            if flip or (variant.honest and not ok) or (not variant.honest and variant.exact_format and ok
                                                       and not row["not_lowered"]):
                bad.append(f"{task.name} / {variant.name}: {verdict}")
            rows.append({**row, "flip": flip})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    path = write_result(f"precision_contract_{args.device}", _metrics(rows), extra={"rows": rows})
    print(f"wrote {path}")
    print("\n".join(["", "unexpected verdicts:", *bad]) if bad else "\nevery honest variant accepted, every lowered "
          "one (fixed rounding) refused, no verdict flipped")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
