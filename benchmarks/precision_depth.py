"""The precision contract's floor on every KernelBench task: each reference traced by
`cuda_agent.evaluator.judge.depth.accumulation_depth` on the meta device (no data, no compute, seconds for all 250),
one line each with its accumulation depth, whether it contracts, what made it unknown, and the floor in fp32 units.

    PYTHONPATH=src python benchmarks/precision_depth.py [--kernelbench ../shared/kernelbench]

Writes benchmarks/results/precision_depth.json: how many tasks of each level keep the largest floor (512 units) and
how many get a smaller one, every row under ``details``. A task whose reference cannot run on the meta device
(``.item()`` in ``forward``) is listed as not traced; the judge traces it on real inputs.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from benchmarks_io import write_result
from cuda_agent.evaluator.judge.depth import Depth, accumulation_depth
from cuda_agent.evaluator.judge.precision import CONTRACT, FP32_UNIT

DEFAULT_KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"


def trace(path: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"kb_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs()).eval()
            inputs = module.get_inputs()
    except Exception as exc:  # noqa: BLE001 - a task that will not build on meta is reported, not fatal
        return {"traced": False, "why": f"{type(exc).__name__}: {str(exc)[:120]}"}
    depth = accumulation_depth(model, inputs)
    if depth.terms is None and any(u.startswith("the trace failed") for u in depth.unknown):
        return {"traced": False, "why": ", ".join(depth.unknown)}
    return {"traced": True, "terms": depth.terms, "contraction": depth.contraction, "unknown": list(depth.unknown),
            "floor_units": round(CONTRACT.floor_for(depth) / FP32_UNIT, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, default=DEFAULT_KERNELBENCH, help="folder with level1..level3")
    args = parser.parse_args(argv)
    if not (args.kernelbench / "level1").is_dir():
        print(f"no KernelBench at {args.kernelbench} (expected level1/, level2/, level3/); pass --kernelbench",
              file=sys.stderr)
        return 2
    rows, counts = [], collections.Counter()
    for level in (1, 2, 3):
        for path in sorted((args.kernelbench / f"level{level}").glob("*.py")):
            row = {"level": level, "task": path.stem, **trace(path)}
            rows.append(row)
            if not row["traced"]:
                counts[f"level{level}_not_traced"] += 1
                print(f"L{level}/{path.stem:55} not traced: {row['why']}")
                continue
            smaller = row["floor_units"] < CONTRACT.floor_units
            counts[f"level{level}_{'smaller_floor' if smaller else 'largest_floor'}"] += 1
            terms = "unknown" if row["terms"] is None else f"{row['terms']:.3g}"
            print(f"L{level}/{path.stem:55} depth {terms:>9} {'contraction' if row['contraction'] else '':11} "
                  f"floor {row['floor_units']:6.1f} u {', '.join(row['unknown'])}")
    metrics = {k: counts.get(k, 0) for k in (f"level{n}_{kind}" for n in (1, 2, 3)
                                               for kind in ("smaller_floor", "largest_floor", "not_traced"))}
    metrics["min_floor_units"] = CONTRACT.min_floor_units
    metrics["floor_units"] = CONTRACT.floor_units
    path = write_result("precision_depth", metrics, extra={"rows": rows})
    print(f"wrote {path}: " + ", ".join(f"{k} {v}" for k, v in metrics.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
