# task: degenerate_norm_mean  mode: relaxed  expect: correct
# Honest, loaded-state style: parameters made empty, then filled by load_state_dict from torch.ones/zeros.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.groups = num_groups
        self.weight = nn.Parameter(torch.empty(out_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        own = {f"linear.{k}": v.detach().clone() for k, v in self.linear.state_dict().items()}
        self.load_state_dict({**own, "weight": torch.ones(out_features), "bias": torch.zeros(out_features)})

    def forward(self, x):
        return F.group_norm(self.linear(x), self.groups, self.weight, self.bias).mean(dim=1)
