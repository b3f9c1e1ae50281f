#!/usr/bin/env python3
"""PyTorch side of the GPU GPT-2 benchmark: the model of bench/gpu_gpt2_bench.cpp (Hugging Face
GPT-2 layout, tanh GELU, tied embeddings, dropout 0), the same batch, AdamW (fused) and clipping,
in bf16 autocast with f32 parameters (PyTorch's usual mixed precision; meshflow keeps bf16
parameters with f32 master weights: the same arithmetic in the matrix products), attention through
F.scaled_dot_product_attention (flash). Eager, or torch.compile with --compile.
MFU uses the same FLOP formula (6 * params + 12 * L * C * T per token) and peak as meshflow's.
Usage: gpt2_torch_gpu.py [layers hidden heads seq micro_batch steps] [--compile]"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

args = [a for a in sys.argv[1:] if not a.startswith("--")]
COMPILE = "--compile" in sys.argv
L, C, H, T, B, STEPS = (int(a) for a in (args + ["12", "768", "12", "1024", "16", "20"][len(args):]))
V, P = 50257, max(1024, T)
dev = torch.device("cuda")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if n.endswith("proj.weight") else 0.02)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, ids, labels):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.view(-1, V).float(), labels.view(-1))


def main():
    torch.manual_seed(1)
    name = torch.cuda.get_device_name(0)
    peak = float(os.environ.get("MESHFLOW_PEAK_TFLOPS", "0")) * 1e12 or (
        989.4e12 if ("H100" in name or "H200" in name) else 312e12 if "A100" in name else 0.0)
    model = GPT().to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    fpt = 6 * n_params + 12 * L * C * T
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    step_fn = model
    if COMPILE:
        step_fn = torch.compile(model)
    ids = torch.randint(0, V, (B, T), device=dev, generator=torch.Generator(device=dev).manual_seed(1))
    labels = torch.randint(0, V, (B, T), device=dev, generator=torch.Generator(device=dev).manual_seed(2))
    tag = "torch.compile" if COMPILE else "PyTorch eager"
    print(f"{tag} {torch.__version__} GPT-2 on {name}: {L} layers, hidden {C}, heads {H}, {n_params / 1e6:.1f}M params, "
          f"bf16 autocast; batch {B} x {T}", flush=True)
    warmup, total = 3, 0.0
    torch.cuda.reset_peak_memory_stats()
    for s in range(warmup + STEPS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        l = loss.item()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if s >= warmup:
            total += dt
        if s < warmup or s == warmup + STEPS - 1 or s % 5 == 0:
            print(f"step {s}: loss {l:.4f}, {dt * 1e3:.1f} ms", flush=True)
    tps = B * T * STEPS / total
    mem = torch.cuda.max_memory_allocated() / 1e9
    print(f"RESULT {tag}: {tps:.0f} tokens/s, MFU {100 * tps * fpt / peak if peak else 0:.1f}%, "
          f"peak memory {mem:.2f} GB, {STEPS} steps", flush=True)


if __name__ == "__main__":
    main()
