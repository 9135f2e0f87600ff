"""Triton in the candidate's process (runner/jit.py, runner/broker.py, judge/jit.py), on a CPU: Triton compiles a
kernel for an H100/H200 (sm_90) without a GPU, so the whole route runs here for real: the candidate process confined
to one process (seccomp on) inside its sandbox, Triton's ptxas call routed to the compile broker in a sandbox of its
own, the cubin back. The GPU side (launching the kernels) is tests/evaluator/test_jit_gpu.py."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cuda_agent.errors import SandboxError
from cuda_agent.evaluator.judge import jit as judge_jit
from cuda_agent.evaluator.judge.candidate import CandidateProcess
from cuda_agent.evaluator.runner import jit as runner_jit
from cuda_agent.evaluator.runner.broker import Broker, Refused, normalise_options
from cuda_agent.sandbox._probe import check_sandbox

HONEST = Path(__file__).parent / "cases" / "honest"
TOOLS = judge_jit.triton_tools()
needs_triton = pytest.mark.skipif("ptxas" not in TOOLS, reason="needs Triton's bundled ptxas")
PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry touch(.param .u64 out) {
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
"""


def _sandbox() -> None:
    try:
        check_sandbox("userns")
    except SandboxError as exc:
        pytest.skip(f"no sandbox here: {exc}")


def test_options_outside_the_list_are_refused() -> None:
    triton_like = ["-lineinfo", "-v", "--regAllocOptLevel=2", "--opt-level", "0", "--fmad=false",
                   "--gpu-name=sm_90a"]
    assert normalise_options(triton_like) == ["-lineinfo", "-v", "--regAllocOptLevel=2", "--opt-level=0",
                                              "--fmad=false", "--gpu-name=sm_90a"]
    for hostile in (["-o", "/tmp/x"], ["--output-file=/tmp/x"], ["--input-as-string", "x"], ["--gpu-name=$(id)"],
                    ["-v"] * 40, "-v", [3]):
        with pytest.raises(Refused):
            normalise_options(hostile)


def test_ptxas_command_lines_are_split_as_triton_writes_them() -> None:
    argv = ["-lineinfo", "-v", "--gpu-name=sm_90a", "/tmp/a.ptx", "-o", "/tmp/a.ptx.o"]
    assert runner_jit._split(argv) == (["-lineinfo", "-v", "--gpu-name=sm_90a"], "/tmp/a.ptx", "/tmp/a.ptx.o")
    assert runner_jit._split(["--version"]) == (["--version"], None, None)


@needs_triton
def test_the_broker_compiles_ptx_and_refuses_the_rest() -> None:
    broker = Broker(TOOLS, timeout_s=60)
    done = broker.handle({"op": "compile", "tool": "ptxas", "options": ["-v", "--gpu-name=sm_90a"], "ptx": PTX})
    assert done["ok"] and done["rc"] == 0, done
    import base64

    assert base64.b64decode(done["cubin"])[:4] == b"\x7fELF"
    assert "release" in broker.handle({"op": "version", "tool": "ptxas"})["stdout"]
    broken = broker.handle({"op": "compile", "tool": "ptxas", "options": [], "ptx": PTX.replace("ret;", "bogus;")})
    assert broken["rc"] != 0 and "cubin" not in broken and broken["stderr"]
    for bad in ({"op": "compile", "tool": "sh", "options": [], "ptx": PTX},
                {"op": "compile", "tool": "ptxas", "options": ["-o", "/etc/passwd"], "ptx": PTX},
                {"op": "compile", "tool": "ptxas", "options": [], "ptx": "x" * (33 << 20)},
                {"op": "run", "tool": "ptxas"}):
        with pytest.raises(Refused):
            broker.handle(bad)


def test_triton_kernel_names_are_read_from_the_source() -> None:
    source = (HONEST / "l1_softmax_triton_online" / "solution.py").read_text()
    assert judge_jit.triton_kernel_names(source) == ("softmax_rows",)
    decorated = "import triton\n@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef tuned(x):\n  pass\n" \
                "@triton.jit\ndef triton_poi_fused_add_0(x):\n  pass\n@torch.no_grad()\ndef helper():\n  pass\n"
    assert judge_jit.triton_kernel_names(decorated) == ("tuned",)
    assert judge_jit.triton_kernel_names("def jit(): pass\n") == ()


# The honest Triton cases' kernels, compiled for sm_90 inside the confined candidate.
_WRAPPER = '''
import importlib.util, os, subprocess
import torch
import torch.nn as nn
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

KERNELS = [
    ("relu_case", "relu", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 4096}),
    ("softmax_case", "softmax_rows", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_cols": "i32", "stride": "i32",
                                      "BLOCK": "constexpr"}, {"BLOCK": 2048}),
    ("gelu_case", "new_gelu", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "K0": "constexpr",
                               "BLOCK": "constexpr"}, {"K0": 0.7978845608028654, "BLOCK": 2048}),
]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        sizes = []
        for module_name, kernel, signature, constants in KERNELS:
            spec = importlib.util.spec_from_file_location(module_name, f"/scratch/{module_name}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            compiled = triton.compile(ASTSource(getattr(module, kernel), signature, constants),
                                      target=GPUTarget("cuda", 90, 32))
            assert compiled.metadata.name == kernel and compiled.asm["cubin"][:4] == b"\\x7fELF"
            sizes.append(float(len(compiled.asm["cubin"])))
        try:
            subprocess.run(["/bin/true"])
            refused = 0.0
        except PermissionError as exc:
            refused = float("starts no programs" in str(exc))
        visible = float(len([p for p in os.listdir("/proc") if p.isdigit()]))
        self.register_buffer("evidence", torch.tensor([min(sizes), refused, visible]))

    def forward(self, x):
        return x
'''


def _load_wrapper(compile_broker: bool) -> dict:
    files = {f"{name}.py": (HONEST / case / "solution.py").read_text()
             for name, case in (("relu_case", "l1_relu_triton"), ("softmax_case", "l1_softmax_triton_online"),
                                ("gelu_case", "l1_new_gelu_triton"))}
    return _load_source(_WRAPPER, compile_broker, files)


@pytest.mark.slow
@needs_triton
def test_triton_compiles_in_the_confined_candidate_through_the_broker() -> None:
    _sandbox()
    reply = _load_wrapper(compile_broker=True)
    assert reply.get("ok"), reply
    (name, _shape, total, squares), = reply["parameters"]
    # evidence = [smallest cubin, other programs refused, processes the candidate can see]: sum and sum of squares
    # pin all three (a cubin of >1000 bytes, refused == 1, and only the candidate itself in its /proc).
    smallest = total - 2.0
    assert name == "evidence" and smallest > 1000 and squares == smallest ** 2 + 2.0, reply["parameters"]


@pytest.mark.slow
@needs_triton
def test_without_the_broker_triton_is_refused_with_a_reason() -> None:
    _sandbox()
    reply = _load_wrapper(compile_broker=False)
    assert not reply.get("ok") and reply["stage"] == "runtime_error"
    assert "starts no programs" in reply["reason"] and "ptxas" in reply["reason"], reply["reason"]


_VERSION_TASK = '''
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
def get_inputs():
    return [torch.randn(8, 64)]
def get_init_inputs():
    return []
'''
_VERSION_SOLUTION = '''
import torch, torch.nn as nn
import triton


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        # Triton's first question to ptxas, the one every Triton kernel asks at its first launch
        assert triton.knobs.nvidia.ptxas.version

    def forward(self, x):
        return torch.relu(x) * 2.0
'''


@pytest.mark.slow
@needs_triton
def test_the_warm_workers_spares_keep_their_compile_broker(tmp_path: Path) -> None:
    """Through the warm worker, whose judges adopt spare candidate processes started ahead: the fork server swept
    every child that was not a judge or a spare candidate, the spares' compile brokers included, so each adopted
    spare reached no broker (on the H200, 2026-12-04, all three Triton cases: "the evaluator's compile broker is
    gone"). Three evaluations in a row, each asking ptxas its version through the broker, are all judged."""
    from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate
    from cuda_agent.tasks.task import Task

    _sandbox()
    solution = tmp_path / "sol.py"
    solution.write_text(_VERSION_SOLUTION)
    config = EvalConfig(mode="relaxed", profile=False, device="cpu")
    with WarmWorker() as worker:
        for n in range(3):
            result = evaluate(Task(id=f"user/ptxas_version_{n}", code=_VERSION_TASK), solution, config,
                              worker=worker)
            assert result.stage == "correct", (n, result.stage, result.reason, result.log[-1500:])


_HELPER_WRAPPER = '''
import hashlib, os, tempfile
import torch
import torch.nn as nn
from triton.runtime import build


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        source = os.path.join(os.path.dirname(build.__file__), "..", "backends", "nvidia", "driver.c")
        out = tempfile.mkdtemp()
        built = build._build("cuda_utils", source, out, [], [], [], [])
        with open(built, "rb") as fh:
            same = float(fh.read() == b"prebuilt helper")
        with open(os.path.join(out, "other.c"), "w") as fh:
            fh.write("int main(void) { return 0; }")
        try:
            other = build._build("other", os.path.join(out, "other.c"), out, [], [], [], [])
            with open(other, "rb") as fh:
                outcome = float(fh.read(4) == b"\\x7fELF")  # 1: built (by the broker)
        except PermissionError as exc:
            outcome = 2.0 * float("compiles no C code" in str(exc))  # 2: refused, with the reason
        self.register_buffer("evidence", torch.tensor([same, outcome]))

    def forward(self, x):
        return x
'''


@pytest.mark.slow
@needs_triton
@pytest.mark.parametrize("compile_broker", [True, False])
def test_tritons_helper_build_is_answered_with_the_prebuilt_copy_only(compile_broker: bool) -> None:
    """Triton's own driver.c (checked by its SHA-256) gets the helper the judge staged in the scratch folder, never a
    build; any other C compilation (a launcher) is the broker's, and refused without one, inside the confined
    candidate."""
    _sandbox()
    if compile_broker and "cc" not in TOOLS:
        pytest.skip("needs a C compiler")
    import hashlib
    import json

    source = judge_jit._helper_source()
    assert source is not None
    root = Path(tempfile.mkdtemp(prefix="ca-jit-test-"))
    scratch = root / "scratch"
    (scratch / judge_jit.HELPER_DIR).mkdir(parents=True)
    os.chmod(scratch, 0o777)
    (scratch / "solution.py").write_text(_HELPER_WRAPPER)
    (scratch / judge_jit.HELPER_DIR / "cuda_utils.so").write_bytes(b"prebuilt helper")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    (scratch / judge_jit.HELPER_DIR / "index.json").write_text(json.dumps({digest: {"file": "cuda_utils.so"}}))
    proc = CandidateProcess(scratch=scratch, gpu=False, sandboxed=True, tap=False, compile_broker=compile_broker)
    try:
        proc.start(180)
        reply = proc.request({"op": "load", "device": "cpu", "kind": "single_file", "module": "/scratch/solution.py",
                              "library": None, "inline_dir": None, "seed": 1, "init_inputs": [],
                              "perturb_init": False, "kernel_tap": False}, timeout=300)
    finally:
        proc.close()
        shutil.rmtree(root, ignore_errors=True)
    assert reply.get("ok"), reply
    # evidence = [the prebuilt copy (1), the other file: built by the broker (1) or refused (2)]
    expected = [2.0, 2.0] if compile_broker else [3.0, 5.0]
    assert reply["parameters"][0][2:] == expected, reply["parameters"]


@pytest.mark.skipif(judge_jit._helper_source() is None, reason="needs Triton")
def test_staging_never_follows_what_the_build_left_in_scratch(tmp_path: Path) -> None:
    """The single-file build runs the candidate's code with the scratch folder writable: a symlink it leaves where the
    judge stages Triton's helper is removed, and the host folder it names is not written."""
    import hashlib
    import json

    host = tmp_path / "host"
    host.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / judge_jit.HELPER_DIR).symlink_to(host)
    cache_root = tmp_path / "cache"
    source_sha = hashlib.sha256(judge_jit._helper_source().read_bytes()).hexdigest()
    cache = judge_jit.helper_cache_dir(cache_root, source_sha)
    cache.mkdir(parents=True)
    (cache / "cuda_utils.so").write_bytes(b"built")
    (cache / "helper.json").write_text(json.dumps({"source_sha256": source_sha,
                                                   "sha256": hashlib.sha256(b"built").hexdigest()}))
    note = judge_jit.stage_helper(scratch, cache_root, sandboxed=True, gpu=True)
    assert "compile broker" in note
    staged = scratch / judge_jit.HELPER_DIR
    assert not staged.is_symlink() and (staged / "cuda_utils.so").read_bytes() == b"built"
    assert json.loads((staged / "index.json").read_text()) == {source_sha: {"file": "cuda_utils.so"}}
    assert not any(host.iterdir())


def test_torch_compile_regions_are_pytorch_compute_in_strict_mode_whatever_the_kernel_names() -> None:
    """Now that ptxas is served, torch.compile can run in the candidate; its kernels may carry any name (even one the
    solution's source defines), so the regions the profiler records around compiled code decide."""
    from cuda_agent.evaluator.judge.kernels import audit
    from cuda_agent.evaluator.runner.tap import attribute

    events = [
        {"cat": "user_annotation", "name": "ca_call:1", "ts": 0, "dur": 100},
        {"cat": "cpu_op", "name": "Torch-Compiled Region: 0/0", "ts": 10, "dur": 50, "args": {"External id": 5}},
        {"cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": 20, "dur": 2, "args": {"correlation": 9}},
        {"cat": "kernel", "name": "scale_copy", "ts": 30, "dur": 4, "args": {"correlation": 9, "stream": 7}},
        {"cat": "user_annotation", "name": "ca_copy:1", "ts": 120, "dur": 20},
        {"cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": 125, "dur": 2, "args": {"correlation": 11}},
        {"cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 130, "dur": 3, "args": {"correlation": 11, "stream": 7}},
    ]
    inventory = {"ok": True, "tap": True, "calls": attribute(events)}
    strict = audit(inventory, [1], ("scale_copy",), strict=True, expect_copies=True)
    assert [rule for rule, _ in strict.rules] == ["torch_compute_in_forward"], strict.rules
    assert "torch.compile" in strict.rules[0][1] and strict.own_launched == 1
    assert not audit(inventory, [1], ("scale_copy",), strict=False, expect_copies=True).rules


_LAUNCHER_WRAPPER = r'''
import ctypes, subprocess, sysconfig
import torch, torch.nn as nn

LAUNCHER = "#include <Python.h>\nint launch_twice(int x) { return 2 * x + (PY_MAJOR_VERSION == 3); }\n"


def build(extra):
    # the command line Triton (before 3.7) runs for a kernel signature's launcher
    with open("/tmp/__triton_launcher.c", "w") as fh:
        fh.write(LAUNCHER)
    command = ["cc", "/tmp/__triton_launcher.c", "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o",
               "/tmp/__triton_launcher.so", f"-I{sysconfig.get_paths()['include']}", *extra]
    try:
        subprocess.check_call(command, stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        return -1.0
    return float(ctypes.CDLL("/tmp/__triton_launcher.so").launch_twice(20))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("evidence", torch.tensor([build([]), build(["-fplugin=/tmp/evil.so"])]))

    def forward(self, x):
        return x
'''


def _load_source(source: str, compile_broker: bool, files: dict[str, str] | None = None) -> dict:
    """Load ``source`` as a single-file solution in a confined candidate process on the CPU (``files``: more files
    beside it in the scratch folder); the load's reply."""
    root = Path(tempfile.mkdtemp(prefix="ca-jit-test-"))
    scratch = root / "scratch"
    scratch.mkdir()
    os.chmod(scratch, 0o777)
    (scratch / "solution.py").write_text(source)
    for name, text in (files or {}).items():
        (scratch / name).write_text(text)
    proc = CandidateProcess(scratch=scratch, gpu=False, sandboxed=True, tap=False, compile_broker=compile_broker)
    try:
        proc.start(180)
        return proc.request({"op": "load", "device": "cpu", "kind": "single_file", "module": "/scratch/solution.py",
                             "library": None, "inline_dir": None, "seed": 1, "init_inputs": [], "perturb_init": False,
                             "kernel_tap": False}, timeout=300)
    finally:
        proc.close()
        shutil.rmtree(root, ignore_errors=True)


@needs_triton
@pytest.mark.skipif("cc" not in TOOLS, reason="needs a C compiler")
def test_a_tritons_launcher_is_built_by_the_broker_and_plugins_are_refused() -> None:
    # H200, 2026-12-04: Triton 3.6 (torch 2.11) compiles a C launcher per kernel signature, and the candidate's
    # process, which may start no compiler, refused it: all three Triton cases failed at their first launch.
    _sandbox()
    reply = _load_source(_LAUNCHER_WRAPPER, compile_broker=True)
    assert reply.get("ok"), reply
    (name, _shape, total, squares), = reply["parameters"]
    # evidence = [the launcher's answer (2 x 20 + 1), the plugin build (-1: refused)]
    assert name == "evidence" and (total, squares) == (41.0 - 1.0, 41.0 ** 2 + 1.0), reply["parameters"]


def test_c_options_are_those_of_a_launcher_build_only() -> None:
    from cuda_agent.evaluator.runner.broker import normalise_c_options

    usual = ["-O3", "-shared", "-fPIC", "-Wno-psabi", "-lcuda", "-L/usr/lib/x86_64-linux-gnu",
             "-I/opt/triton/backends/nvidia/include", "-I/usr/include/python3.12", "-l:libcuda.so.1"]
    assert normalise_c_options(usual) == usual
    for bad in (["-fplugin=/tmp/x.so"], ["-o", "/etc/passwd"], ["-B/tmp"], ["-specs=/tmp/s"], ["-wrapper", "sh"],
                ["-Wl,-T,/tmp/script"], ["@/tmp/response"], ["-Irelative"], ["-x", "c"], "-O3"):
        with pytest.raises(Refused):
            normalise_c_options(bad)
    broker = Broker({**TOOLS, "cc": "/bin/true"}, timeout_s=10)
    with pytest.raises(Refused):  # the C compiler is never run on PTX, nor ptxas on C
        broker.handle({"op": "compile", "tool": "cc", "options": [], "ptx": PTX})
    with pytest.raises(Refused):
        broker.handle({"op": "cc", "tool": "ptxas", "options": [], "source": "int x;"})


@pytest.mark.skipif(judge_jit.c_compiler() is None, reason="needs a C compiler")
def test_a_c_source_that_reads_without_end_is_stopped_by_the_address_space() -> None:
    # the candidate's C is compiled by the broker: `#include "/dev/zero"` has the preprocessor read forever
    broker = Broker({"cc": judge_jit.c_compiler()}, timeout_s=60, memory_bytes=768 << 20)
    import time

    start = time.monotonic()
    done = broker.handle({"op": "cc", "tool": "cc", "options": ["-shared", "-fPIC"],
                          "source": '#include "/dev/zero"\nint x;\n'})
    assert done["ok"] and done["rc"] != 0 and "library" not in done, done
    assert time.monotonic() - start < 50  # the memory limit ended it, not the broker's timeout
    fine = broker.handle({"op": "cc", "tool": "cc", "options": ["-O2", "-shared", "-fPIC"], "source": "int x = 1;\n"})
    assert fine["rc"] == 0 and fine["library"], fine  # an ordinary source builds under the same limit
