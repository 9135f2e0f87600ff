import math

import torch
import torch.nn as nn

from binding import ops


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        assert attn_pdrop == 0.0 and resid_pdrop == 0.0, "dropout with p > 0 is random; this kernel has none"
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        x2 = x.view(B * T, C)
        qkv = torch.empty((B * T, 3 * C), device=x.device, dtype=x.dtype)
        ops.linear(x2, self.c_attn.weight, self.c_attn.bias, qkv)
        scores = torch.empty((B, self.n_head, T, T), device=x.device, dtype=x.dtype)
        y = torch.empty((B * T, C), device=x.device, dtype=x.dtype)
        ops.causal_attention(qkv, scores, y, B, T, self.n_head, 1.0 / math.sqrt(hs))
        out = torch.empty((B * T, C), device=x.device, dtype=x.dtype)
        ops.linear(y, self.c_proj.weight, self.c_proj.bias, out)
        return out.view(B, T, C)
