"""The easy task split of the one-GPU RL run (`benchmarks/rl_gpu.py`): KernelBench level-1 elementwise and
reduction tasks, a training set and a held-out set with no task in both.

Why fixed lists: a run that continues in a later session (from saved LoRA adapters) must train and measure on the
same tasks, and a reader must see which tasks were held out. The lists were drawn once by hand so that each side
has elementwise activations and reductions (sums, norms, softmax-like, arg-reductions, losses); nothing here reads
the tasks' code to choose. Matmul, convolution, pooling, normalisation-over-batch and scan tasks are left out: a
0.5B model has no chance on them, and their inputs are the largest of level 1.

Small inputs (`load_split(size="small")`, the run's default): the same modules with a smaller ``batch_size``
(`SMALL_BATCH`), 1-17 million elements a tensor instead of KernelBench's 0.5-2.1 billion. Rationale: on the H200
(2026-12-04) an evaluation of a correct reply on the 6 GiB tasks took about a minute (the first measurement of its
baselines and of the reference on the judge's clock, K = 1 calls of 13 GB, the precision probe's copies), so a
15-minute session got through one warm-up step; the kernels a 0.5B model must learn to write (one thread an
element, a row reduction) are the same at either size. Every small task's id ends in ``-small`` (its baselines,
cached by the source's hash, are its own).
"""
from __future__ import annotations

import re
from dataclasses import replace

from cuda_agent.tasks.task import Task

ELEMENTWISE = ("L1/19_ReLU", "L1/20_LeakyReLU", "L1/21_Sigmoid", "L1/22_Tanh", "L1/25_Swish", "L1/26_GELU_",
               "L1/27_SELU_", "L1/28_HardSigmoid", "L1/29_Softplus", "L1/30_Softsign", "L1/31_ELU",
               "L1/32_HardTanh", "L1/88_MinGPTNewGelu")
REDUCTIONS = ("L1/23_Softmax", "L1/24_LogSoftmax", "L1/36_RMSNorm_", "L1/37_FrobeniusNorm_", "L1/38_L1Norm_",
              "L1/39_L2Norm_", "L1/47_Sum_reduction_over_a_dimension", "L1/48_Mean_reduction_over_a_dimension",
              "L1/49_Max_reduction_over_a_dimension", "L1/51_Argmax_over_a_dimension",
              "L1/52_Argmin_over_a_dimension", "L1/53_Min_reduction_over_a_dimension", "L1/94_MSELoss",
              "L1/96_HuberLoss", "L1/100_HingeLoss")
HELDOUT = ("L1/20_LeakyReLU", "L1/22_Tanh", "L1/27_SELU_", "L1/30_Softsign", "L1/32_HardTanh", "L1/88_MinGPTNewGelu",
           "L1/24_LogSoftmax", "L1/38_L1Norm_", "L1/48_Mean_reduction_over_a_dimension",
           "L1/52_Argmin_over_a_dimension", "L1/53_Min_reduction_over_a_dimension", "L1/96_HuberLoss")
TRAIN = tuple(t for t in ELEMENTWISE + REDUCTIONS if t not in HELDOUT)

# batch_size of the small variant; elements a tensor in brackets (KernelBench's in the comment above each group)
ROWS_393216 = 8      # (3.1M) the activations, softmax and log-softmax: 4096 x 393216
SMALL_BATCH = {
    **{t: ROWS_393216 for t in ELEMENTWISE + ("L1/23_Softmax", "L1/24_LogSoftmax") if t != "L1/88_MinGPTNewGelu"},
    "L1/88_MinGPTNewGelu": 512,                          # (4.2M) 8192 x 8192
    "L1/36_RMSNorm_": 1, "L1/37_FrobeniusNorm_": 1,      # (16.8M) 112 x 64 x 512 x 512
    "L1/38_L1Norm_": 64, "L1/39_L2Norm_": 64,            # (4.2M) 32768 x 65535
    **{t: 1 for t in ("L1/47_Sum_reduction_over_a_dimension", "L1/48_Mean_reduction_over_a_dimension",
                      "L1/49_Max_reduction_over_a_dimension", "L1/51_Argmax_over_a_dimension",
                      "L1/52_Argmin_over_a_dimension", "L1/53_Min_reduction_over_a_dimension")},  # (16.8M) 128 x 4096 x 4095
    "L1/94_MSELoss": 128, "L1/96_HuberLoss": 128, "L1/100_HingeLoss": 128,  # (4.2M) 32768 x 32768
}
SIZES = ("small", "kernelbench")
_BATCH_LINE = re.compile(r"^batch_size\s*=\s*(\d+)[ \t]*$", re.MULTILINE)


def small_inputs(task: Task) -> Task:
    """``task`` with its module-level ``batch_size`` set to ``SMALL_BATCH[task.id]`` and ``-small`` added to its id.
    Raises `TaskError` for a task not in the table, or whose source has not exactly one ``batch_size = N`` line (a
    changed KernelBench file must not be run at a size nobody chose)."""
    from cuda_agent.errors import TaskError

    if task.id not in SMALL_BATCH:
        raise TaskError(f"{task.id}: no small size chosen for it (easy_tasks.SMALL_BATCH)")
    found = _BATCH_LINE.findall(task.code)
    if len(found) != 1:
        raise TaskError(f"{task.id}: expected one 'batch_size = N' line in its source, found {len(found)}")
    small = SMALL_BATCH[task.id]
    if small >= int(found[0]):
        raise TaskError(f"{task.id}: the small batch {small} is not below the source's {found[0]}")
    code = _BATCH_LINE.sub(f"batch_size = {small}", task.code)
    return replace(task, id=f"{task.id}-small", code=code, name=f"{task.name}-small", path=None,
                   metadata={**task.metadata, "resized_from": task.id, "batch_size": small,
                             "kernelbench_batch_size": int(found[0])})


def split_ids() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(train_ids, heldout_ids)``: disjoint, in a fixed order."""
    return TRAIN, HELDOUT


def load_split(size: str = "small") -> tuple[list[Task], list[Task]]:
    """The two task lists, read from the KernelBench folder (`cuda_agent.locations.kernelbench_root`), with small
    inputs (`small_inputs`) or KernelBench's own (``size="kernelbench"``). Raises `TaskError` when KernelBench is
    not found or an id names no task, or when an id resolves to another task; ValueError for another size."""
    from cuda_agent.errors import TaskError

    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {', '.join(SIZES)}")
    from cuda_agent.tasks.loaders import resolve_task

    def load(task_id: str) -> Task:
        task = resolve_task(task_id)
        if task.id != task_id:
            raise TaskError(f"{task_id}: resolved to {task.id}; the easy-task list is out of date")
        return task

    resize = small_inputs if size == "small" else (lambda task: task)
    return [resize(load(t)) for t in TRAIN], [resize(load(t)) for t in HELDOUT]
