"""The easy task split of the one-GPU RL run (`benchmarks/rl_gpu.py`): KernelBench level-1 elementwise and
reduction tasks, a training set and a held-out set with no task in both.

Why fixed lists: a run that continues in a later session (from saved LoRA adapters) must train and measure on the
same tasks, and a reader must see which tasks were held out. The lists were drawn once by hand so that each side
has elementwise activations and reductions (sums, norms, softmax-like, arg-reductions, losses); nothing here reads
the tasks' code to choose. Matmul, convolution, pooling, normalisation-over-batch and scan tasks are left out: a
0.5B model has no chance on them, and their inputs are the largest of level 1.
"""
from __future__ import annotations

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


def split_ids() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(train_ids, heldout_ids)``: disjoint, in a fixed order."""
    return TRAIN, HELDOUT


def load_split() -> tuple[list[Task], list[Task]]:
    """The two task lists, read from the KernelBench folder (`cuda_agent.locations.kernelbench_root`). Raises
    `TaskError` when KernelBench is not found or an id names no task, or when an id resolves to another task."""
    from cuda_agent.errors import TaskError
    from cuda_agent.tasks.loaders import resolve_task

    def load(task_id: str) -> Task:
        task = resolve_task(task_id)
        if task.id != task_id:
            raise TaskError(f"{task_id}: resolved to {task.id}; the easy-task list is out of date")
        return task

    return [load(t) for t in TRAIN], [load(t) for t in HELDOUT]
