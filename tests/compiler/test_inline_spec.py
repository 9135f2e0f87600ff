"""Finding load_inline calls without running the file: the formats real solutions use, and the recorder fallback."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.compiler.inline import InlineExtractionError, InlineSpec, InlineSpecError, extract_inline_specs
from cuda_agent.compiler.inline.loader import call_to_spec
from cuda_agent.compiler.inline.record import read_recording
from cuda_agent.errors import BuildError

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "benchmarks" / "single_file_solutions"


def test_every_benchmark_solution_extracts_statically():
    paths = sorted(SOLUTIONS.glob("*.py"))
    assert len(paths) >= 30
    for path in paths:
        specs = extract_inline_specs(path.read_text(), origin=path.name)
        assert specs, path.name
        for spec in specs:
            assert spec.cuda_sources and "__global__" in "".join(spec.cuda_sources), path.name


def test_the_kernelbench_prompt_format():
    src = (SOLUTIONS / "elementwise_add.py").read_text()
    (spec,) = extract_inline_specs(src)
    assert spec.name == "elementwise_add"
    assert spec.functions == (("elementwise_add_cuda", "elementwise_add_cuda"),)
    assert spec.cpp_sources == ("torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);",)
    assert spec.extra_cflags == ("",) and spec.extra_ldflags == ("",)
    assert "elementwise_add_kernel" in spec.cuda_sources[0]


def test_expressions_of_constants():
    src = '''
import textwrap
from textwrap import dedent
from torch.utils.cpp_extension import load_inline as li
import torch.utils.cpp_extension as ce
N = 256
HEAD = "#include <torch/extension.h>\\n"
body = f"""
__global__ void k(float* x) {{ x[threadIdx.x] *= {N}; }}
"""
body += "// tail"
decls = ["torch::Tensor f(torch::Tensor x);", "torch::Tensor g(torch::Tensor x);"]
cpp = "\\n".join(decls)
flags = ["-O3"] + ["--use_fast_math"]
common = dict(verbose=True, extra_cflags=["-O2"])
a = li("ext_a", cpp, HEAD + body, functions=["f", "g"], extra_cuda_cflags=flags, **common)
b = ce.load_inline(name="ext_b", cpp_sources=dedent("""
    int h();"""), cuda_sources=textwrap.dedent("  // %s" % "x"), functions={"h": "doc of h"}, with_cuda=True)
'''
    first, second = extract_inline_specs(src)
    assert first.name == "ext_a" and first.cuda_sources[0].startswith("#include <torch/extension.h>\n")
    assert "*= 256;" in first.cuda_sources[0] and first.cuda_sources[0].endswith("// tail")
    assert first.cpp_sources == ("torch::Tensor f(torch::Tensor x);\ntorch::Tensor g(torch::Tensor x);",)
    assert first.extra_cuda_cflags == ("-O3", "--use_fast_math") and first.extra_cflags == ("-O2",)
    assert second.name == "ext_b" and second.cpp_sources == ("\nint h();",)
    assert second.cuda_sources == ("// x",) and second.functions == (("h", "doc of h"),) and second.with_cuda


def test_a_call_sees_the_values_names_have_at_that_point():
    src = 'from torch.utils.cpp_extension import load_inline\nS = "a"\nx = load_inline("e1", S)\nS = "b"\n' \
          'y = load_inline("e2", S)\ndef later():\n    return load_inline("e3", S)\n'
    specs = extract_inline_specs(src)
    assert [(s.name, s.cpp_sources) for s in specs] == [("e1", ("a",)), ("e2", ("b",)), ("e3", ("b",))]


@pytest.mark.parametrize("snippet", [
    "load_inline('e', open('x.cpp').read())",
    "load_inline('e', src)",
    "for i in range(2):\n    s = str(i)\nload_inline('e', s)",
    "load_inline('e', 'x', *more)",
    "load_inline('e', 'x', None, None, ['f'])",
])
def test_calls_that_are_not_static_are_refused(snippet):
    with pytest.raises(InlineExtractionError, match="not static"):
        extract_inline_specs("from torch.utils.cpp_extension import load_inline\n" + snippet)


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "bad-name", "cpp_sources": "x"}, "identifier"),
    ({"name": "e", "cpp_sources": 3}, "cpp_sources"),
    ({"name": "e", "cpp_sources": "x", "sycl_sources": "y"}, "SYCL"),
    ({"name": "e", "cpp_sources": "x", "unknown": 1}, "unexpected"),
])
def test_invalid_calls_raise_spec_errors(kwargs, match):
    with pytest.raises(InlineSpecError, match=match):
        InlineSpec.from_call(kwargs)


def test_key_ignores_how_loudly_torch_would_build_but_not_what():
    base = call_to_spec(("e", "int f();"), {"functions": ["f"], "verbose": True, "build_directory": "/tmp/x"})
    same = call_to_spec(("e",), {"cpp_sources": ["int f();"], "functions": ["f"]})
    other = call_to_spec(("e", "int f();"), {"functions": ["f"], "extra_cflags": ["-O3"]})
    assert base.key() == same.key() != other.key()
    assert InlineSpec.from_dict(json.loads(json.dumps(other.to_dict()))) == other


def test_the_recorder_captures_dynamic_calls_and_stops_where_the_extension_is_needed(tmp_path):
    solution = tmp_path / "dynamic.py"
    solution.write_text(
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
        "def make(n):\n    return '\\n'.join(f'int f{i}();' for i in range(n))\n"
        "ext = load_inline(name='dyn', cpp_sources=make(2), functions=['f0', 'f1'])\n"
        "ext2 = load_inline(name='dyn2', cpp_sources=make(1), functions=['f0'])\n"
        "try:\n    ext.f0()\nexcept Exception:\n    pass\n"
        "third = load_inline(name='never', cpp_sources='')\n")
    out = tmp_path / "rec.json"
    proc = subprocess.run([sys.executable, "-m", "cuda_agent.compiler.inline.record", str(solution), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["complete"] is False and "dyn" in data["error"]
    specs = read_recording(out.read_text())
    assert [s.name for s in specs] == ["dyn", "dyn2"]
    assert specs[0].cpp_sources == ("int f0();\nint f1();",)
    with pytest.raises(InlineExtractionError):
        extract_inline_specs(solution.read_text())


@pytest.mark.parametrize("text", ["[]", '{"specs": [{"name": "x; rm -rf", "cpp_sources": "a"}]}', "nope"])
def test_a_bad_recording_is_refused(text):
    with pytest.raises(BuildError):
        read_recording(text)
