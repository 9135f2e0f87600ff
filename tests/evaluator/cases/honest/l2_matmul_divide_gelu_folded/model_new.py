import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor
        with torch.no_grad():
            w_scaled = (self.linear.weight.double() / divisor).float()
            b_scaled = (self.linear.bias.double() / divisor).float()
        self.register_buffer("w_scaled", w_scaled.contiguous())
        self.register_buffer("b_scaled", b_scaled.contiguous())

    def forward(self, x):
        out = torch.empty((x.shape[0], self.w_scaled.shape[0]), device=x.device, dtype=x.dtype)
        ops.linear_gelu(x, self.w_scaled, self.b_scaled, out)
        return out
