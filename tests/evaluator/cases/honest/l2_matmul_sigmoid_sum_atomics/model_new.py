import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear = nn.Linear(input_size, hidden_size)

    def forward(self, x):
        n = x.shape[0]
        scratch = torch.empty((n, self.linear.out_features), device=x.device, dtype=x.dtype)
        out = torch.zeros((n, 1), device=x.device, dtype=x.dtype)  # atomically accumulated
        ops.linear_sigmoid_rowsum(x, self.linear.weight, self.linear.bias, scratch, out)
        return out
