"""Real builds: torch's load_inline and ours on the same solutions give modules that behave the same; the cache.

Each side is imported in its own process (pybind11 keeps one module per name per interpreter), runs the case's
``probe()`` and writes JSON: function names, their docstrings (pybind11 signatures), return values and error
messages on CPU tensors, or on the GPU under the ``gpu`` marker. torch's builds take minutes on a small CPU, so
each is made once per session.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from cuda_agent.compiler.inline import (
    PrebuiltResolver, build_inline, extract_inline_specs, sha256_file,
)
from cuda_agent.compiler.builder import run_local

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")]

CASES = Path(__file__).resolve().parent / "inline_cases"
EXPECTED = {"cpu_branch_split": ("split", "sig"), "cpp_body_constant": ("light", "main")}

PROBE = r"""
import json, os, runpy, sys
case, out = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3:
    from cuda_agent.compiler.inline import PrebuiltResolver, install
    install(PrebuiltResolver({k: tuple(v) for k, v in json.load(open(sys.argv[3])).items()}))
ns = runpy.run_path(case, run_name="cak_case")
ext = ns["ext"]
names = sorted(n for n in dir(ext) if not n.startswith("_"))
result = {"names": names, "docs": {n: getattr(ext, n).__doc__ for n in names},
          "probe": ns["probe"](os.environ.get("CAK_DEVICE", "cpu"))}
json.dump(result, open(out, "w"))
"""


@pytest.fixture(scope="session")
def cuda_env() -> Iterator[dict[str, str]]:
    """torch finds the toolkit from CUDA_HOME (or guesses from nvcc's folder, which a wrapper script defeats);
    point both builders at nvcc's own toolkit."""
    from cuda_agent.compiler.inline.torchenv import toolkit_root
    from cuda_agent.compiler.toolchain import nvcc_path

    old = os.environ.get("CUDA_HOME")
    os.environ["CUDA_HOME"] = old or str(toolkit_root(nvcc_path()))
    yield dict(os.environ)
    if old is None:
        os.environ.pop("CUDA_HOME", None)


@pytest.fixture(scope="session")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inline")


def _probe(case: str, out: Path, env: dict[str, str], manifest: dict[str, Any] | None = None,
           device: str = "cpu") -> dict[str, Any]:
    argv = [sys.executable, "-c", PROBE, str(CASES / f"{case}.py"), str(out)]
    if manifest is not None:
        mfile = out.with_suffix(".manifest.json")
        mfile.write_text(json.dumps(manifest))
        argv.append(str(mfile))
    proc = subprocess.run(argv, capture_output=True, text=True, env={**env, "CAK_DEVICE": device}, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="session")
def torch_builds(cuda_env: dict[str, str], scratch: Path) -> dict[str, dict[str, str]]:
    """torch's own build of each case, once (its TORCH_EXTENSIONS_DIR is reused by later probes). The builds run
    side by side: each takes about 80 s on the H200 host, where one after the other ran past the GPU stage's limit."""
    envs = {case: {**cuda_env, "TORCH_EXTENSIONS_DIR": str(scratch / "torch" / case), "TORCH_CUDA_ARCH_LIST": "9.0"}
            for case in EXPECTED}
    with ThreadPoolExecutor(max_workers=len(envs)) as pool:
        list(pool.map(lambda case: _probe(case, scratch / f"{case}.torch.cpu.json", envs[case]), envs))
    return envs


@pytest.fixture(scope="session")
def our_builds(cuda_env: dict[str, str], scratch: Path) -> dict[str, tuple[list[Any], dict[str, Any]]]:
    built = {}
    for case in EXPECTED:
        specs = extract_inline_specs((CASES / f"{case}.py").read_text())
        results = [build_inline(s, cache_dir=scratch / "cache", arch="90", work_dir=scratch / "work") for s in specs]
        for result in results:
            assert result.ok, result.diagnostics + "\n" + result.log[-3000:]
        manifest = {s.key(): [str(r.module_path), sha256_file(r.module_path)] for s, r in zip(specs, results)}
        built[case] = (results, manifest)
    return built


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_our_module_behaves_like_torchs(case, torch_builds, our_builds, scratch):
    results, manifest = our_builds[case]
    assert (results[0].strategy, results[0].binding) == EXPECTED[case]
    theirs = json.loads((scratch / f"{case}.torch.cpu.json").read_text())
    ours = _probe(case, scratch / f"{case}.ours.cpu.json", torch_builds[case], manifest)
    assert ours["names"] == theirs["names"] and len(ours["names"]) >= 2
    assert ours["docs"] == theirs["docs"]
    assert ours["probe"] == theirs["probe"]


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_our_module_behaves_like_torchs_on_the_gpu(case, torch_builds, our_builds, scratch):
    _, manifest = our_builds[case]
    theirs = _probe(case, scratch / f"{case}.torch.gpu.json", torch_builds[case], device="cuda")
    ours = _probe(case, scratch / f"{case}.ours.gpu.json", torch_builds[case], manifest, device="cuda")
    assert ours == theirs


def _counting_runner(calls: list[list[str]]):
    def run(argv, cwd, timeout):
        calls.append(list(argv))
        return run_local(argv, cwd, timeout)

    return run


def test_an_identical_source_never_builds_twice(our_builds, scratch):
    results, _ = our_builds["cpu_branch_split"]
    spec = extract_inline_specs((CASES / "cpu_branch_split.py").read_text())[0]
    calls: list[list[str]] = []
    again = build_inline(spec, cache_dir=scratch / "cache", arch="90", runner=_counting_runner(calls))
    assert again.ok and again.cache_hit and calls == []
    assert again.module_path == results[0].module_path


def test_a_corrupted_cached_module_is_detected_and_rebuilt(cuda_env, our_builds, scratch):
    spec = extract_inline_specs((CASES / "cpu_branch_split.py").read_text())[0]
    cache = scratch / "cache"
    first = build_inline(spec, cache_dir=cache, arch="90")
    assert first.cache_hit and first.module_path is not None
    data = bytearray(first.module_path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    first.module_path.write_bytes(bytes(data))
    with pytest.raises(Exception, match="sha256"):
        PrebuiltResolver({spec.key(): (first.module_path, first.module_path.name.split(".")[0])})(spec)
    calls: list[list[str]] = []
    rebuilt = build_inline(spec, cache_dir=cache, arch="90", runner=_counting_runner(calls))
    assert rebuilt.ok and not rebuilt.cache_hit and calls, "the damaged module was rebuilt, not loaded"
    assert rebuilt.module_path is not None and sha256_file(rebuilt.module_path) == rebuilt.module_path.name[:64]
