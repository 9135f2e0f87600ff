"""The allow-list of flags a single-file solution may pass to the compilers and the linker."""
from __future__ import annotations

import sys

import pytest

from cuda_agent.compiler.inline import InlineSpec, build_inline
from cuda_agent.compiler.inline.flags import (
    InlineFlagError, check_cxx_flags, check_include_paths, check_ldflags, check_nvcc_flags, host_flags_from_nvcc,
    is_neutral,
)


def test_the_flags_solutions_use_are_accepted():
    assert check_cxx_flags(["-O3", "", "-std=c++17", "-DUSE_FAST=1", "-fopenmp", "-march=native", "-Wno-unused"]) \
        == ["-O3", "-std=c++17", "-DUSE_FAST=1", "-fopenmp", "-march=native", "-Wno-unused"]
    assert check_nvcc_flags(["-O3", "--use_fast_math", "-lineinfo", "-Xptxas=-v,-O3", "--maxrregcount=64",
                             "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-O3,-fopenmp",
                             "--expt-relaxed-constexpr", "-O3 --use_fast_math"]) == [
        "-O3", "--use_fast_math", "-lineinfo", "-Xptxas", "-v,-O3", "--maxrregcount=64",
        "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-O3,-fopenmp", "--expt-relaxed-constexpr",
        "-O3", "--use_fast_math"]
    assert check_ldflags(["", "-lcublas", "-lcublasLt", "-Wl,--no-as-needed"]) == \
        ["-lcublas", "-lcublasLt", "-Wl,--no-as-needed"]
    assert check_include_paths([sys.prefix]) and check_include_paths([" "]) == []


@pytest.mark.parametrize("flag", [
    "-fplugin=/tmp/evil.so", "-B/tmp/bin", "-include/etc/passwd", "-wrapper", "@/tmp/args", "-save-temps",
    "-fdump-tree-all", "-I/root/.ssh", "-x", "-o/tmp/out", "$(touch /tmp/pwned)", "-O3;id", "-specs=/tmp/s",
    "-fprofile-generate", "-flto",
])
def test_host_flags_outside_the_list_are_refused(flag):
    with pytest.raises(InlineFlagError):
        check_cxx_flags([flag])


@pytest.mark.parametrize("flags", [
    ["-ccbin", "/tmp/fake-gcc"], ["--compiler-bindir=/tmp"], ["-Xcompiler", "-fplugin=/tmp/p.so"],
    ["-Xcompiler=-B/tmp"], ["--keep-dir", "/tmp"], ["-include", "/etc/shadow"], ["--options-file", "/tmp/f"],
    ["-Xptxas", "--output-file=/tmp/x"], ["--default-stream", "per-thread"], ["-rdc=true"], ["-Xlinker", "-e"],
])
def test_nvcc_flags_outside_the_list_are_refused(flags):
    with pytest.raises(InlineFlagError):
        check_nvcc_flags(flags)


@pytest.mark.parametrize("flag", ["-Wl,--wrap=malloc", "-L/tmp", "-Wl,-rpath,/tmp", "/tmp/evil.o", "-shared -B/tmp"])
def test_linker_flags_outside_the_list_are_refused(flag):
    with pytest.raises(InlineFlagError):
        check_ldflags([flag])


def test_what_nvcc_hands_to_the_host_compiler():
    assert host_flags_from_nvcc(["-O3", "--use_fast_math", "-DX=1", "-Xcompiler", "-fopenmp,-O2", "-lineinfo",
                                 "-std=c++17", "-G"]) == ["-O3", "-DX=1", "-fopenmp", "-O2", "-std=c++17", "-g"]
    assert is_neutral("-O3") and is_neutral("-Wall") and not is_neutral("-DX") and not is_neutral("-ffast-math")


def test_a_refused_flag_is_a_build_error_before_any_compiler_runs(tmp_path):
    calls = []

    def runner(argv, cwd, timeout):
        calls.append(argv)
        raise AssertionError("no compiler may run")

    spec = InlineSpec.from_call({"name": "evil", "cpp_sources": "int f();", "functions": ["f"],
                                 "extra_cflags": ["-fplugin=/tmp/evil.so"]})
    result = build_inline(spec, cache_dir=tmp_path / "cache", arch="90", runner=runner, work_dir=tmp_path)
    assert not result.ok and "-fplugin=/tmp/evil.so" in result.diagnostics and "not allowed" in result.diagnostics
    assert calls == []
    with pytest.raises(Exception, match="fplugin"):
        result.raise_for_errors()
