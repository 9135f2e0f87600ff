import torch
import torch.nn as nn

from binding import ops  # the functions your kernels/*.cu files export with CA_EXPORT


class ModelNew(nn.Module):
    """Replace Model's computation with your own CUDA kernels (see SKILL.md).

    Keep the constructor's arguments and the parameters' names and shapes as in model.py: the evaluator loads
    Model's state_dict into ModelNew.
    """

    def __init__(self, *args, **kwargs):
        super().__init__()
        raise NotImplementedError("write ModelNew: see SKILL.md")

    def forward(self, *inputs):
        raise NotImplementedError("write ModelNew.forward: see SKILL.md")
