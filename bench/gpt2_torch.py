#!/usr/bin/python3
"""PyTorch side of the GPT-2 training benchmark: the same model (Hugging Face GPT-2 layout,
tanh GELU, tied embeddings, dropout 0.1), batch, AdamW and clipping as bench/gpt2_train_bench.cpp.
Run with Debian's python3-torch at its best settings here (scripts/bench_gpt2.sh sets
OMP_NUM_THREADS, ATEN_CPU_CAPABILITY=avx512 and OPENBLAS_CORETYPE=SkylakeX for its BLAS).
Usage: gpt2_torch.py [layers hidden heads seq micro_batch steps]"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_steps import time_training_steps

L, C, H, T, B, STEPS = (int(a) for a in (sys.argv[1:] + ["12", "768", "12", "256", "4", "6"][len(sys.argv) - 1:]))
V, P = 50257, 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True) if hasattr(
            F, "scaled_dot_product_attention") else self.attn(q, k, v)
        x = x + self.drop(self.attn_proj(y.transpose(1, 2).reshape(B, T, C)))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))

    def attn(self, q, k, v):
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = F.dropout(att.masked_fill(~mask, float("-inf")).softmax(-1), 0.1, self.training)
        return att @ v


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f, self.drop = nn.LayerNorm(C), nn.Dropout(0.1)

    def forward(self, idx, labels):
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T)))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), labels.view(-1))


torch.manual_seed(0)
model = GPT()
with torch.no_grad():  # GPT-2 initialisation, as meshflow's
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.zero_()
        elif "ln_" in name:
            p.fill_(1.0)
        else:
            p.normal_(0.0, 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02)
x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
time_training_steps(model, x, y, STEPS, "GPT-2")
