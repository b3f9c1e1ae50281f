#!/usr/bin/python3
"""Writes tests/golden/gpt2_tiny.json: a tiny GPT-2 (Hugging Face layout, written here in plain
PyTorch from the GPT-2 paper/code, dropout off) with its weights, a batch, the logits, the loss
and every parameter gradient. Run with Debian's python3-torch: /usr/bin/python3 scripts/make_gpt2_golden.py"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
V, P, C, L, H = 61, 16, 24, 2, 4
B, T = 2, 9
D = C // H


def param(*shape, std=0.02):
    return (torch.randn(*shape, dtype=torch.float64) * std).requires_grad_(True)


w = {"transformer.wte.weight": param(V, C), "transformer.wpe.weight": param(P, C)}
for i in range(L):
    p = f"transformer.h.{i}."
    w[p + "ln_1.weight"] = (1 + 0.1 * torch.randn(C, dtype=torch.float64)).requires_grad_(True)
    w[p + "ln_1.bias"] = param(C, std=0.1)
    w[p + "attn.c_attn.weight"] = param(C, 3 * C, std=0.2)
    w[p + "attn.c_attn.bias"] = param(3 * C, std=0.1)
    w[p + "attn.c_proj.weight"] = param(C, C, std=0.2)
    w[p + "attn.c_proj.bias"] = param(C, std=0.1)
    w[p + "ln_2.weight"] = (1 + 0.1 * torch.randn(C, dtype=torch.float64)).requires_grad_(True)
    w[p + "ln_2.bias"] = param(C, std=0.1)
    w[p + "mlp.c_fc.weight"] = param(C, 4 * C, std=0.2)
    w[p + "mlp.c_fc.bias"] = param(4 * C, std=0.1)
    w[p + "mlp.c_proj.weight"] = param(4 * C, C, std=0.2)
    w[p + "mlp.c_proj.bias"] = param(C, std=0.1)
w["transformer.ln_f.weight"] = (1 + 0.1 * torch.randn(C, dtype=torch.float64)).requires_grad_(True)
w["transformer.ln_f.bias"] = param(C, std=0.1)

ids = torch.randint(0, V, (B, T))
labels = torch.randint(0, V, (B, T))
labels[0, 3] = -100  # ignored position


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(ids):
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = gelu_tanh(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    return x @ w["transformer.wte.weight"].t()


logits = forward(ids)
loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
loss.backward()

out = {
    "config": {"vocab_size": V, "max_seq_length": P, "hidden_size": C, "num_layers": L, "num_attention_heads": H},
    "ids": ids.tolist(), "labels": labels.tolist(),
    "weights": {k: {"shape": list(v.shape), "data": v.detach().flatten().tolist()} for k, v in w.items()},
    "logits": logits.detach().flatten().tolist(),
    "loss": loss.item(),
    "grads": {k: v.grad.flatten().tolist() for k, v in w.items()},
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "gpt2_tiny.json")
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", path, "loss", out["loss"])
