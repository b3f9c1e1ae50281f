#!/usr/bin/python3
"""PyTorch side of the Llama training benchmark: the same model (Hugging Face Llama layout: RMSNorm,
rotate-half rotary embeddings, grouped-query attention by repeating the key/value heads, SwiGLU,
untied head, no dropout, no biases), batch, AdamW and clipping as bench/llama_train_bench.cpp,
f32. Run with Debian's python3-torch at its best settings here (scripts/bench_train.sh sets
OMP_NUM_THREADS, ATEN_CPU_CAPABILITY=avx512 and OPENBLAS_CORETYPE=SkylakeX for its BLAS).
Usage: llama_torch.py [layers hidden heads kv_heads ffn seq micro_batch steps]"""
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_steps import time_training_steps

DEFAULTS = ["12", "768", "12", "4", "2048", "256", "4", "6"]
L, C, H, KV, FF, T, B, STEPS = (int(a) for a in (sys.argv[1:] + DEFAULTS[len(sys.argv) - 1:]))
V, D, EPS = 32000, C // H, 1e-5


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freq)
COS, SIN = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
MASK = torch.ones(T, T, dtype=torch.bool).tril()


def rope(x):
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * COS + torch.cat((-x2, x1), -1) * SIN


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
        self.q_proj, self.k_proj = nn.Linear(C, H * D, bias=False), nn.Linear(C, KV * D, bias=False)
        self.v_proj, self.o_proj = nn.Linear(C, KV * D, bias=False), nn.Linear(H * D, C, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(C, FF, bias=False), nn.Linear(C, FF, bias=False)
        self.down_proj = nn.Linear(FF, C, bias=False)

    def forward(self, x):
        h = self.input_layernorm(x)
        q = rope(self.q_proj(h).view(B, T, H, D).transpose(1, 2))
        k = rope(self.k_proj(h).view(B, T, KV, D).transpose(1, 2)).repeat_interleave(H // KV, dim=1)
        v = self.v_proj(h).view(B, T, KV, D).transpose(1, 2).repeat_interleave(H // KV, dim=1)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = ((q @ k.transpose(-2, -1)) / math.sqrt(D)).masked_fill(~MASK, float("-inf")).softmax(-1)
            y = att @ v
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, H * D))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(Block() for _ in range(L))
        self.norm, self.lm_head = RMSNorm(), nn.Linear(C, V, bias=False)

    def forward(self, idx, labels):
        x = self.embed_tokens(idx)
        for b in self.layers:
            x = b(x)
        return F.cross_entropy(self.lm_head(self.norm(x)).view(-1, V), labels.view(-1))


torch.manual_seed(0)
model = Llama()
with torch.no_grad():  # Hugging Face's initialisation, as meshflow's
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
        else:
            p.normal_(0.0, 0.02)
x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
time_training_steps(model, x, y, STEPS, "Llama")
