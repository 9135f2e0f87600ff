import torch
import torch.nn as nn

from binding import ops

NO_ACTIVATION, SIGMOID = 0, 1


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        n = x.shape[0]
        h = torch.empty((n, self.linear1.out_features), device=x.device, dtype=x.dtype)
        ops.linear(x, self.linear1.weight, self.linear1.bias, h, SIGMOID)
        z = torch.empty((n, self.linear2.out_features), device=x.device, dtype=x.dtype)
        ops.linear(h, self.linear2.weight, self.linear2.bias, z, NO_ACTIVATION)
        out = torch.empty((n,), device=x.device, dtype=x.dtype)
        ops.logsumexp(z, out)
        return out
