"""The build step's compiler runs in a sandbox too: a kernel file cannot read host files through the compiler."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cuda_agent.sandbox import sandboxed_runner
from cuda_agent.workspace import PROTECTED_ROOTS

KERNEL = """#include "cuda_agent.h"
__global__ void scale_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
void scale(ca::Tensor x, ca::Tensor out) {
  int64_t n = x.numel();
  scale_kernel<<<(n + 255) / 256, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
CA_EXPORT(scale);
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                                reason="needs nvcc")


def test_runner_confines_commands(workspace: Path, sibling: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run = sandboxed_runner(workspace, extra_rw=[cache], protected=PROTECTED_ROOTS)
    secret = (sibling / "secret.txt").read_text().strip()
    done = run(["bash", "-c", f"cat {sibling}/secret.txt; cat /etc/shadow; echo x > {cache}/obj.o; "
                              "echo y > model.py; echo z > kernels/ok.cu; pwd; id -u"], workspace, 60)
    assert secret not in done.stdout + done.stderr
    assert (cache / "obj.o").read_text() == "x\n"
    assert (workspace / "kernels/ok.cu").read_text() == "z\n"
    assert (workspace / "model.py").read_text().startswith("import torch")
    assert done.stdout.split()[-2:] == [str(workspace.resolve()), "65534"]
    with pytest.raises(subprocess.TimeoutExpired):
        run(["sleep", "30"], workspace, 1)


@needs_nvcc
@pytest.mark.slow
def test_build_with_sandboxed_nvcc(workspace: Path, sibling: Path, tmp_path: Path) -> None:
    from cuda_agent.compiler import build_workspace

    cache = tmp_path / "cache"
    run = sandboxed_runner(workspace, extra_rw=[cache])
    (workspace / "kernels/scale.cu").write_text(KERNEL)
    good = build_workspace(workspace, arch="sm_90", cache_dir=cache, runner=run)
    assert good.ok, good.diagnostics
    assert good.library is not None and good.library.exists()

    secret = (sibling / "secret.txt").read_text().strip()
    (workspace / "kernels/scale.cu").write_text(f'#include "{sibling}/secret.txt"\n#include "/etc/shadow"\n')
    bad = build_workspace(workspace, arch="sm_90", cache_dir=cache, runner=run)
    assert not bad.ok
    assert secret not in bad.diagnostics + bad.log
    assert "No such file" in bad.diagnostics + bad.log


def test_a_compiler_installed_outside_usr_is_there_inside(workspace: Path, request: pytest.FixtureRequest,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A build resolves its compiler outside (a GPU host's CXX=/opt/gcc/bin/g++) and names it by that path in a
    script the sandbox runs: the compiler's prefix must be bound inside, or every build fails to link."""
    from cuda_agent.sandbox._layout import compiler_roots

    # not under /tmp: the sandbox has a /tmp of its own, and toolchains are not installed there
    prefix = Path(tempfile.mkdtemp(prefix="cak-toolchain-", dir="/var/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(prefix, ignore_errors=True))
    (prefix / "bin").mkdir(parents=True)
    (prefix / "libexec").mkdir()
    (prefix / "libexec" / "cc1plus-stand-in").write_text("the compiler's own files\n")
    cxx = prefix / "bin" / "g++"
    cxx.write_text(f'#!/bin/sh\ncat {prefix}/libexec/cc1plus-stand-in\necho "compiled $@"\n')
    cxx.chmod(0o755)
    script = workspace / "build.sh"
    script.write_text(f"{cxx} -c main.cpp\n")  # the path only in the script, not on the command line
    monkeypatch.setenv("CXX", str(cxx))
    compiler_roots.cache_clear()
    try:
        assert str(prefix.resolve()) in compiler_roots()
        done = sandboxed_runner(workspace)(["sh", "build.sh"], workspace, 60)
    finally:
        compiler_roots.cache_clear()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["the compiler's own files", "compiled -c main.cpp"]


def test_a_toolchain_under_the_hosts_tmp_is_not_hidden_by_the_sandboxs_tmp(workspace: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout cloned under /tmp has its virtual environment there: the sandbox's own /tmp must not cover it (it
    did: every sandboxed Python then failed with 'No such file or directory')."""
    from cuda_agent.sandbox import _layout, runner

    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "marker").write_text("the toolchain is here\n")
    roots = lambda: (str(prefix.resolve()),)  # noqa: E731
    monkeypatch.setattr(_layout, "compiler_roots", roots)
    monkeypatch.setattr(runner, "compiler_roots", roots)
    (workspace / "look.sh").write_text(f"cat {prefix}/bin/marker\n")  # the path only in the script
    done = sandboxed_runner(workspace)(["sh", "look.sh"], workspace, 60)
    assert done.returncode == 0 and done.stdout == "the toolchain is here\n", done.stderr
