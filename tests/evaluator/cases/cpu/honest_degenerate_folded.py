# task: degenerate_norm_mean  mode: relaxed  expect: correct
# Honest, folded style: the reference's layers made in its order, then __init__ folds GroupNorm's affine and the
# final mean into two vectors (mean_c(gamma_c z_c + beta_c) = sum_c (gamma_c / C) z_c + mean(beta)).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        norm = nn.GroupNorm(num_groups, out_features)
        self.groups = num_groups
        self.register_buffer("coeff", (norm.weight / out_features).detach().clone())
        self.register_buffer("offset", norm.bias.detach().mean().reshape(1))

    def forward(self, x):
        y = self.linear(x)
        g = y.view(y.shape[0], self.groups, -1)
        z = ((g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)).view_as(y)
        return z @ self.coeff + self.offset
