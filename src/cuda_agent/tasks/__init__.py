"""Tasks and task sets: KernelBench folders and hub dataset, CUDA-Agent-Ops-6K, and a user's own files."""
from cuda_agent.tasks.loaders import (
    load_hub_dataset,
    load_kernelbench_dir,
    load_parquet,
    load_rows,
    load_task_file,
    load_tasks,
    load_user_path,
    resolve_task,
)
from cuda_agent.tasks.task import Task
from cuda_agent.tasks.taskset import LoadFailure, TaskSet
from cuda_agent.tasks.validate import TaskSignature, dry_run, exec_module, guess_ops

__all__ = [
    "LoadFailure",
    "Task",
    "TaskSet",
    "TaskSignature",
    "dry_run",
    "exec_module",
    "guess_ops",
    "load_hub_dataset",
    "load_kernelbench_dir",
    "load_parquet",
    "load_rows",
    "load_task_file",
    "load_tasks",
    "load_user_path",
    "resolve_task",
]
