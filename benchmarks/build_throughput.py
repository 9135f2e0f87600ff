"""Build throughput of KernelBench single-file solutions: cuda-agent's inline builder against torch's load_inline,
on the same files, in the same run, with the same number of builds in parallel, each from a cold cache.

    PYTHONPATH=src python3 benchmarks/build_throughput.py [--jobs 16] [--limit N] [--torch-limit N] [--skip-torch]
        [--burst] [--verify] [--arch 90] [--no-prepare] [--keep DIR]

1. prepare: the precompiled headers for the two common flag sets (none, -O3) and the binding objects of 23 common
   signatures, built once per toolchain (`cuda_agent.compiler.inline.warm_up`); reported as ``prepare_s``, not counted
   in any solution's time (``--no-prepare``: the first solutions build them on demand).
2. ours: every solution's load_inline calls (found statically) built with `build_inline`, ``--jobs`` solutions
   at a time (default: one per core, as a build pool runs them), into an empty object cache. ``--burst`` then
   empties the object cache again and starts every solution at once: ``burst_median_s`` is the time from that
   common start to each solution's end (what a client waits when 30+ arrive together).
3. torch: the same calls run by torch's own load_inline, ``--jobs`` at a time, each in its own process with an
   empty TORCH_EXTENSIONS_DIR and TORCH_CUDA_ARCH_LIST set to the same architecture; the time is measured around
   the load_inline calls inside the process (interpreter start and ``import torch`` excluded, as for ours).
4. ``--verify`` (needs a GPU): each solution's ModelNew run with both builds on the same inputs, outputs compared.

Writes benchmarks/results/build_throughput.json. Uses the standard library, torch and this repository only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks_io import write_result
from cuda_agent.compiler import detect_arch, normalize_arch
from cuda_agent.compiler.inline import (
    InlineSpec, build_inline, extract_inline_specs, sha256_file, warm_up,
)
from cuda_agent.compiler.inline.torchenv import torch_env

HERE = Path(__file__).resolve().parent

TORCH_BUILD = r"""
import json, sys, time
import torch
from torch.utils.cpp_extension import load_inline
specs = json.load(open(sys.argv[1]))
start = time.perf_counter()
for spec in specs:
    kwargs = {k: v for k, v in spec.items() if k not in ("origin",)}
    if kwargs.get("functions") is not None:
        kwargs["functions"] = {name: doc for name, doc in kwargs["functions"]}
    load_inline(verbose=False, **kwargs)
print("CAK_SECONDS", time.perf_counter() - start)
"""

RUN_MODEL = r"""
import json, runpy, sys
import torch
mode, solution, out = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "ours":
    from cuda_agent.compiler.inline import PrebuiltResolver, install
    manifest = {k: tuple(v) for k, v in json.load(open(sys.argv[4])).items()}
    install(PrebuiltResolver(manifest))
module = runpy.run_path(solution, run_name="cak_solution")
torch.manual_seed(0)
model = module["ModelNew"](*module["get_init_inputs"]()).cuda()
torch.manual_seed(1)
inputs = module["get_inputs"]()
with torch.no_grad():
    result = model(*inputs)
torch.cuda.synchronize()
torch.save(result.detach().cpu() if isinstance(result, torch.Tensor) else result, out)
"""


def arch_list(arch: str) -> str:
    """TORCH_CUDA_ARCH_LIST for a compute capability: 90 -> 9.0, 90a -> 9.0a."""
    digits = arch.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}{arch[len(digits):]}"


def build_ours(path: Path, specs: list[InlineSpec], cache: Path, arch: str, build_jobs: int) -> dict[str, Any]:
    start = time.perf_counter()
    results = [build_inline(spec, cache_dir=cache, arch=arch, jobs=build_jobs) for spec in specs]
    seconds = time.perf_counter() - start
    return {
        "ok": all(r.ok for r in results), "seconds": round(seconds, 3),
        "strategies": [r.strategy for r in results], "bindings": [r.binding for r in results],
        "steps": [list(map(list, r.steps)) for r in results],
        "diagnostics": "\n".join(r.diagnostics for r in results if not r.ok)[:2000],
        "manifest": {s.key(): [str(r.module_path), sha256_file(r.module_path)]
                     for s, r in zip(specs, results) if r.ok and r.module_path},
    }


def build_torch(path: Path, specs: list[InlineSpec], scratch: Path, arch: str) -> dict[str, Any]:
    folder = scratch / "torch_ext" / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    spec_file = folder / "specs.json"
    spec_file.write_text(json.dumps([s.to_dict() for s in specs]))
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(folder), "TORCH_CUDA_ARCH_LIST": arch_list(arch)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", TORCH_BUILD, str(spec_file)], capture_output=True, text=True,
                          env=env, timeout=3600)
    wall = time.perf_counter() - start
    line = next((l for l in proc.stdout.splitlines() if l.startswith("CAK_SECONDS")), None)
    return {"ok": proc.returncode == 0 and line is not None, "seconds": round(float(line.split()[1]), 3) if line else None,
            "process_s": round(wall, 3), "error": proc.stderr[-2000:] if proc.returncode else ""}


def run_model(mode: str, path: Path, scratch: Path, manifest: dict[str, Any] | None) -> Path | None:
    out = scratch / "outputs" / f"{path.stem}.{mode}.pt"
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-c", RUN_MODEL, mode, str(path), str(out)]
    env = dict(os.environ)
    if mode == "ours":
        mfile = out.with_suffix(".manifest.json")
        mfile.write_text(json.dumps(manifest))
        argv.append(str(mfile))
    else:
        env["TORCH_EXTENSIONS_DIR"] = str(scratch / "torch_ext" / path.stem)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        print(f"  {path.stem} ({mode}) failed to run: {proc.stderr.strip()[-600:]}", file=sys.stderr)
        return None
    return out


def compare(ours: Path | None, theirs: Path | None) -> dict[str, Any]:
    import torch

    if ours is None or theirs is None:
        return {"same": False, "max_abs_diff": None}
    a, b = torch.load(ours), torch.load(theirs)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape or a.dtype != b.dtype:
        return {"same": False, "max_abs_diff": None}
    diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    return {"same": bool(torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6)), "bitwise": bool(torch.equal(a, b)),
            "max_abs_diff": diff}


def drop_objects(cache: Path) -> None:
    """Forget every built module and binding object, keep what `warm_up` made (precompiled headers, the common
    signatures' object: per toolchain, not per solution): the next builds start from a cold object cache."""
    for index in (cache / "index").glob("*.json"):
        data = json.loads(index.read_text())
        if "header" not in data and "signatures" not in data:
            index.unlink()


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", type=Path, default=HERE / "single_file_solutions")
    parser.add_argument("--jobs", type=int, default=None, help="solutions built at once (default: one per core)")
    parser.add_argument("--burst", action="store_true", help="also start all of ours at once on a cold cache")
    parser.add_argument("--build-jobs", type=int, default=4, help="compilers one of our builds may run at once")
    parser.add_argument("--limit", type=int, default=None, help="use the first N solutions")
    parser.add_argument("--only", nargs="*", default=None, help="solution file stems to use")
    parser.add_argument("--torch-limit", type=int, default=None, help="build only the first N with torch too")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--verify", action="store_true", help="run both builds on the GPU and compare outputs")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--no-prepare", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="scratch folder to keep (default: a temp folder)")
    parser.add_argument("--name", default="build_throughput")
    args = parser.parse_args()

    paths = sorted(args.solutions.glob("*.py"))
    if args.only:
        paths = [p for p in paths if p.stem in set(args.only)]
    paths = paths[: args.limit] if args.limit else paths
    specs = {p: extract_inline_specs(p.read_text(), origin=p.name) for p in paths}
    arch = normalize_arch(args.arch or detect_arch())
    jobs = args.jobs or os.cpu_count() or 1
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="cak-build-throughput-"))
    scratch.mkdir(parents=True, exist_ok=True)
    cache = scratch / "cache"
    env = torch_env(None, str(cache))
    print(f"{len(paths)} solutions, {jobs} at a time, sm_{arch}, torch {env.torch_version}, scratch {scratch}",
          file=sys.stderr)

    prepare_s = 0.0 if args.no_prepare else warm_up(cache_dir=cache, arch=arch)
    print(f"prepare: {prepare_s:.1f} s", file=sys.stderr)

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        ours = dict(zip(paths, pool.map(lambda p: build_ours(p, specs[p], cache, arch, args.build_jobs), paths)))
    ours_wall = time.perf_counter() - start
    print(f"ours: {ours_wall:.1f} s wall, median {median([r['seconds'] for r in ours.values()]):.2f} s",
          file=sys.stderr)

    burst: dict[Path, float] = {}
    burst_wall = 0.0
    if args.burst:
        drop_objects(cache)
        start = time.perf_counter()

        def timed(path: Path) -> float:
            build_ours(path, specs[path], cache, arch, args.build_jobs)
            return time.perf_counter() - start

        with ThreadPoolExecutor(len(paths)) as pool:
            burst = dict(zip(paths, pool.map(timed, paths)))
        burst_wall = time.perf_counter() - start
        print(f"burst: {burst_wall:.1f} s wall, median {median(list(burst.values())):.2f} s", file=sys.stderr)

    theirs: dict[Path, dict[str, Any]] = {}
    torch_wall = 0.0
    if not args.skip_torch:
        torch_paths = paths[: args.torch_limit] if args.torch_limit else paths
        start = time.perf_counter()
        with ThreadPoolExecutor(min(jobs, len(torch_paths))) as pool:
            theirs = dict(zip(torch_paths, pool.map(lambda p: build_torch(p, specs[p], scratch, arch), torch_paths)))
        torch_wall = time.perf_counter() - start
        print(f"torch: {torch_wall:.1f} s wall", file=sys.stderr)

    checks: dict[Path, dict[str, Any]] = {}
    if args.verify:
        both_built = [p for p in paths if ours[p]["ok"] and theirs.get(p, {}).get("ok")]

        def check(path: Path) -> dict[str, Any]:
            return compare(run_model("ours", path, scratch, ours[path]["manifest"]),
                           run_model("torch", path, scratch, None))

        with ThreadPoolExecutor(8) as pool:
            checks = dict(zip(both_built, pool.map(check, both_built)))

    rows = []
    for path in paths:
        row = {"solution": path.name, "specs": len(specs[path]), "ours_s": ours[path]["seconds"],
               "ours_ok": ours[path]["ok"], "strategy": ",".join(ours[path]["strategies"]),
               "binding": ",".join(ours[path]["bindings"]), "steps": ours[path]["steps"]}
        if not ours[path]["ok"]:
            row["diagnostics"] = ours[path]["diagnostics"]
        if path in burst:
            row["burst_s"] = round(burst[path], 3)
        if path in theirs:
            row.update(loadinline_s=theirs[path]["seconds"], loadinline_ok=theirs[path]["ok"])
            if not theirs[path]["ok"]:
                row["loadinline_error"] = theirs[path]["error"]
        if path in checks:
            row.update(outputs_match=checks[path]["same"], max_abs_diff=checks[path]["max_abs_diff"],
                       bitwise=checks[path].get("bitwise"))
        rows.append(row)

    ok_ours = [r["ours_s"] for r in rows if r["ours_ok"]]
    both = [r for r in rows if r["ours_ok"] and r.get("loadinline_ok")]
    metrics: dict[str, float | int] = {
        "solutions": len(paths), "jobs": jobs, "cpus": os.cpu_count() or 0,
        "ours_ok": len(ok_ours), "single_file_median_s": median(ok_ours),
        "single_file_p90_s": float(sorted(ok_ours)[int(0.9 * (len(ok_ours) - 1))]) if ok_ours else float("nan"),
        "ours_wall_s": round(ours_wall, 2), "solutions_per_minute": round(len(ok_ours) / ours_wall * 60, 2),
        "prepare_s": round(prepare_s, 2),
        "split_builds": sum(r["strategy"].split(",").count("split") for r in rows),
    }
    if burst:
        metrics.update({"burst_solutions": len(burst), "burst_median_s": median(list(burst.values())),
                        "burst_max_s": max(burst.values()), "burst_wall_s": round(burst_wall, 2),
                        "burst_solutions_per_minute": round(len(burst) / burst_wall * 60, 2)})
    if theirs:
        torch_ok = [r["loadinline_s"] for r in rows if r.get("loadinline_ok")]
        metrics.update({
            "loadinline_ok": len(torch_ok), "loadinline_median_s": median(torch_ok),
            "loadinline_wall_s": round(torch_wall, 2),
            "loadinline_solutions_per_minute": round(len(torch_ok) / torch_wall * 60, 2) if torch_wall else 0,
            "speedup_vs_loadinline": median([r["loadinline_s"] for r in both]) / median([r["ours_s"] for r in both])
            if both else float("nan"),
            "median_per_solution_speedup": median([r["loadinline_s"] / r["ours_s"] for r in both]) if both else
            float("nan"),
        })
    if checks:
        metrics["outputs_compared"] = len(checks)
        metrics["outputs_match"] = sum(1 for c in checks.values() if c["same"])
    metrics = {k: v for k, v in metrics.items() if not (isinstance(v, float) and v != v)}
    extra = {"torch": env.torch_version, "compilers": env.versions.splitlines()[0], "arch": arch, "rows": rows,
             "note": "times per solution are its own build, start to end, with all solutions started together"}
    out = write_result(args.name, metrics, extra=extra)
    print(json.dumps(metrics, indent=2))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
