"""Datasets the engines read: task rows for RL (parquet, verl's RLHFDataset layout) and chat rows for RFT.

A task row: ``prompt`` (chat messages), ``data_source``, ``agent_name`` (which verl agent loop runs it),
``reward_model`` (verl's field; unused by our reward), ``extra_info`` (``task_json``: the `Task`, ``index``).
An SFT row: ``messages`` and ``tools`` (verl's MultiTurnSFTDataset and TRL's conversational format). ``tools`` is a
list of JSON-schema dicts, never a JSON string: verl hands it to ``apply_chat_template(tools=...)``, which iterates
it. ``tools_json`` holds the same list as JSON text, because parquet widens the list's schemas to one union type
(every tool gains the others' properties as nulls); verl's RFT run reads it through
`cuda_agent.rl.verl_sft_data.ExactToolsSFTDataset`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from cuda_agent.tasks.task import Task

DATA_SOURCE = "cuda_agent"
SINGLE_TURN_SYSTEM = (
    "You are an expert CUDA engineer. Reply with one complete Python file in a ```python block: it defines "
    "`class ModelNew(nn.Module)` with the same constructor arguments as `Model`, and compiles its CUDA kernels "
    "inline (for example with torch.utils.cpp_extension.load_inline). It must be correct and faster than "
    "torch.compile."
)


EXAMPLE_TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return x * self.alpha + y

def get_inputs():
    return [torch.rand(4096, 1024), torch.rand(4096, 1024)]

def get_init_inputs():
    return [2.0]"""

EXAMPLE_SOLUTION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void axpy_kernel(const float* x, const float* y, float* out, float alpha, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * alpha + y[i];
}

torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha) {
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    axpy_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), yc.data_ptr<float>(), out.data_ptr<float>(), (float)alpha, n);
    return out;
}
"""

cpp_source = "torch::Tensor axpy(torch::Tensor x, torch::Tensor y, double alpha);"

axpy_ext = load_inline(name="example_axpy", cpp_sources=cpp_source, cuda_sources=cuda_source,
                       functions=["axpy"], verbose=False)

class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, y):
        return axpy_ext.axpy(x, y, self.alpha)'''


TASK_NOT_EXAMPLE = ("Write this task's own solution: its own kernel, extension name and function names, and a "
                    "`ModelNew` whose constructor and `forward` take exactly the arguments of this task's `Model` "
                    "(the example's `alpha`, `y` and `axpy` belong to the example). Reply with the one Python file, "
                    "briefly.")


def model_interface(task_code: str) -> str | None:
    """The skeleton of ``ModelNew`` with the task's own interface: ``Model.__init__``'s and ``Model.forward``'s
    arguments, written as the task writes them, and the constructor's arguments kept as attributes of the same
    names; None where the task's code has no such class to read (then the prompt says it in words).

    Rationale (2-core CPU, 2026-12-04, the 0.5B GGUF, the 12 small held-out tasks, two replies each): with the worked
    example alone, 8 of 24 replies kept the example's interface (``__init__(self, alpha)``, ``forward(self, x, y)``)
    and failed on the task's arguments, and 19 of 24 mentioned its ``axpy``; saying in words to use the task's own
    arguments (`TASK_NOT_EXAMPLE`) changed nothing (5 of 12)."""
    import ast

    try:
        tree = ast.parse(task_code)
    except SyntaxError:
        return None
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    methods = {n.name: n for n in (model.body if model else []) if isinstance(n, ast.FunctionDef)}
    if "forward" not in methods:
        return None

    def signature(fn: ast.FunctionDef) -> str:
        return f"({ast.unparse(fn.args)})" + (f" -> {ast.unparse(fn.returns)}" if fn.returns else "")

    lines = ["class ModelNew(nn.Module):"]
    init = methods.get("__init__")
    names = [a.arg for a in init.args.args[1:] + init.args.kwonlyargs] if init else []
    lines += [f"    def __init__{signature(init)}:" if init else "    def __init__(self):",
              "        super().__init__()", *[f"        self.{n} = {n}" for n in names], "",
              f"    def forward{signature(methods['forward'])}:",
              "        ...  # the same result as Model.forward, computed by your CUDA kernel"]
    return "\n".join(lines)


def single_turn_messages(task: Task) -> list[dict[str, str]]:
    """The warm-up prompt: write a whole solution in one response, after one worked example (a task of our own and
    a solution the evaluator builds and accepts in strict mode: `tests/rl/test_rl_single_turn_example.py`).
    Rationale (H200, 2026-12-04): without one, the 0.5B model's replies called ``load_inline`` without
    ``cpp_sources``, invented ``torch.utils.cpp_extension`` functions, or defined no ``ModelNew``: 0 of 12
    held-out replies passed strict mode, so the reward said little more than "wrong format"."""
    user = ("Example: this PyTorch module\n\n```python\n" + EXAMPLE_TASK + "\n```\n\nis optimised by this file:\n\n"
            "```python\n" + EXAMPLE_SOLUTION + "\n```\n\n"
            f"Now optimise this PyTorch module (task {task.id}) with custom CUDA kernels in the same way:\n\n"
            f"```python\n{task.code.rstrip()}\n```\n\n" + _interface_note(task.code))
    return [{"role": "system", "content": SINGLE_TURN_SYSTEM}, {"role": "user", "content": user}]


def _interface_note(task_code: str) -> str:
    skeleton = model_interface(task_code)
    if skeleton is None:
        return TASK_NOT_EXAMPLE
    return ("Write this task's own kernel and extension (not the example's). Your `ModelNew` keeps exactly this "
            "task's interface; fill in this skeleton:\n\n```python\n" + skeleton + "\n```\n\nReply with the one "
            "Python file, briefly.")


def task_rows(tasks: Iterable[Task], agent_name: str) -> list[dict[str, Any]]:
    """Rows for verl's RL dataset. ``agent_name``: ``single_turn_agent`` (warm-up) or ``cuda_agent``."""
    rows = []
    for index, task in enumerate(tasks):
        prompt = single_turn_messages(task) if agent_name == "single_turn_agent" else [
            {"role": "user", "content": f"Task {task.id}"}]  # the agent loop takes the real prompt from the env
        rows.append({
            "prompt": prompt, "data_source": DATA_SOURCE, "agent_name": agent_name,
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"task_json": json.dumps(task.to_dict()), "index": index},
        })
    return rows


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write rows with pyarrow (a core dependency); nested values become parquet structs and lists."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path


def sft_rows(trajectory_paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Chat rows from kept trajectories (system, task, then assistant turns and their tool results)."""
    from cuda_agent.agent import Trajectory

    rows = []
    for path in trajectory_paths:
        trajectory = Trajectory.load(path)
        tools = list(trajectory.header.get("tools", []))
        rows.append({"messages": [m.to_openai() for m in trajectory.messages()],
                     "tools": list(tools), "tools_json": json.dumps(tools),
                     "reward": trajectory.reward, "task_id": trajectory.header.get("task", {}).get("id")})
    return rows
