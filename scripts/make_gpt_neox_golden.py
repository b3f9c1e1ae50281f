#!/usr/bin/python3
"""Writes tests/golden/gpt_neox_tiny.json: two tiny GPT-NeoX models written here in plain PyTorch
from Hugging Face's conventions (GPTNeoXForCausalLM: pre-LayerNorm blocks with biases everywhere, a
fused query_key_value projection whose output is interleaved per head as (heads, 3 * head_size),
rotate-half rotary embeddings on the first rotary_pct of each head's features only, exact erf GELU,
an untied embed_out head without bias), with their weights, a batch, the logits, the loss and every
parameter gradient, in f64 from weights exact in f32:
  pythia      rotary_pct 0.25 (2 of 8 features rotated), parallel residual
              x = x + attn(ln1(x)) + mlp(ln2(x))
  sequential  rotary_pct 1.0, sequential residual h = x + attn(ln1(x)); x = h + mlp(ln2(h))
Run with Debian's python3-torch: /usr/bin/python3 scripts/make_gpt_neox_golden.py"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(2718)
V, C, L, H, F_ = 61, 32, 2, 4, 48  # F_ = 48, not 4 * C, so a mixup of the two shows
D = C // H
B, T = 2, 9
MAX_POS = 16
EPS = 1e-5

CASES = [
    {"name": "pythia", "rotary_pct": 0.25, "rope_theta": 10000.0, "use_parallel_residual": True},
    {"name": "sequential", "rotary_pct": 1.0, "rope_theta": 10000.0, "use_parallel_residual": False},
]


def param(*shape, std=0.02):
    # Values exact in f32, so the f32 model computes with the reference's very weights.
    return (torch.randn(*shape, dtype=torch.float64) * std).float().double().requires_grad_(True)


def norm_weight():
    return (1 + 0.1 * torch.randn(C, dtype=torch.float64)).float().double().requires_grad_(True)


def weights():
    # Hugging Face's parameter order: GPTNeoXLayer registers its two LayerNorms, then the attention
    # (query_key_value, dense), then the MLP.
    w = {"gpt_neox.embed_in.weight": param(V, C, std=0.3)}
    for i in range(L):
        p = f"gpt_neox.layers.{i}."
        w[p + "input_layernorm.weight"] = norm_weight()
        w[p + "input_layernorm.bias"] = param(C, std=0.1)
        w[p + "post_attention_layernorm.weight"] = norm_weight()
        w[p + "post_attention_layernorm.bias"] = param(C, std=0.1)
        w[p + "attention.query_key_value.weight"] = param(3 * C, C, std=0.2)
        w[p + "attention.query_key_value.bias"] = param(3 * C, std=0.1)
        w[p + "attention.dense.weight"] = param(C, C, std=0.2)
        w[p + "attention.dense.bias"] = param(C, std=0.1)
        w[p + "mlp.dense_h_to_4h.weight"] = param(F_, C, std=0.2)
        w[p + "mlp.dense_h_to_4h.bias"] = param(F_, std=0.1)
        w[p + "mlp.dense_4h_to_h.weight"] = param(C, F_, std=0.2)
        w[p + "mlp.dense_4h_to_h.bias"] = param(C, std=0.1)
    w["gpt_neox.final_layer_norm.weight"] = norm_weight()
    w["gpt_neox.final_layer_norm.bias"] = param(C, std=0.1)
    w["embed_out.weight"] = param(V, C, std=0.3)
    return w


def rotary_ndims(case):
    return int(D * case["rotary_pct"])


def rotate_half(x):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((-x2, x1), dim=-1)


def layer_norm(x, w, prefix):
    return F.layer_norm(x, (C,), w[prefix + ".weight"], w[prefix + ".bias"], EPS)


def linear(x, w, prefix):
    return x @ w[prefix + ".weight"].t() + w[prefix + ".bias"]


def forward(case, w, ids):
    R = rotary_ndims(case)
    inv_freq = 1.0 / (case["rope_theta"] ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, R)
    dt = w["embed_out.weight"].dtype
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)
    causal = torch.arange(T).view(1, T) <= torch.arange(T).view(T, 1)

    def attention(h, p):
        qkv = linear(h, w, p + "attention.query_key_value")  # (B, T, 3C)
        qkv = qkv.view(B, T, H, 3 * D).permute(0, 2, 1, 3)  # (B, H, T, 3D): per-head [q | k | v]
        q, k, v = qkv[..., :D], qkv[..., D:2 * D], qkv[..., 2 * D:]

        def rotate(x):
            x_rot, x_pass = x[..., :R], x[..., R:]
            return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)

        q, k = rotate(q), rotate(k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return linear(y, w, p + "attention.dense")

    def mlp(h, p):
        return linear(F.gelu(linear(h, w, p + "mlp.dense_h_to_4h")), w, p + "mlp.dense_4h_to_h")

    x = w["gpt_neox.embed_in.weight"][ids]
    for layer in range(L):
        p = f"gpt_neox.layers.{layer}."
        a = attention(layer_norm(x, w, p + "input_layernorm"), p)
        if case["use_parallel_residual"]:
            x = x + a + mlp(layer_norm(x, w, p + "post_attention_layernorm"), p)
        else:
            h = x + a
            x = h + mlp(layer_norm(h, w, p + "post_attention_layernorm"), p)
    x = layer_norm(x, w, "gpt_neox.final_layer_norm")
    return x @ w["embed_out.weight"].t()


def f32_error(case, w, ids, labels):
    """The same model run by PyTorch in f32: the largest gradient error against the f64 gradients,
    |g32 - g64| / max(|g64|, 0.1 max|g64|) (the C++ test's measure): what f32 arithmetic reaches."""
    w32 = {k: t.detach().float().requires_grad_(True) for k, t in w.items()}
    logits = forward(case, w32, ids)
    F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100).backward()
    worst = 0.0
    for k, t in w.items():
        r = t.grad
        denom = torch.maximum(r.abs(), 0.1 * r.abs().max())
        worst = max(worst, ((w32[k].grad.double() - r).abs() / denom).max().item())
    return worst


cases = []
for case in CASES:
    w = weights()
    ids = torch.randint(0, V, (B, T))
    labels = torch.randint(0, V, (B, T))
    labels[1, 2] = -100  # an ignored position
    logits = forward(case, w, ids)
    loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    torch_f32 = f32_error(case, w, ids, labels)
    cases.append({
        "config": {"name": case["name"], "vocab_size": V, "hidden_size": C, "num_layers": L, "num_attention_heads": H,
                   "ffn_hidden_size": F_, "max_seq_length": MAX_POS, "layer_norm_eps": EPS,
                   "rotary_pct": case["rotary_pct"], "rope_theta": case["rope_theta"],
                   "use_parallel_residual": case["use_parallel_residual"], "tie_word_embeddings": False},
        "ids": ids.tolist(), "labels": labels.tolist(),
        "weights": {k: {"shape": list(t.shape), "data": t.detach().flatten().tolist()} for k, t in w.items()},
        "logits": logits.detach().flatten().tolist(),
        "loss": loss.item(),
        "grads": {k: t.grad.flatten().tolist() for k, t in w.items()},
        "torch_f32_grad_error": torch_f32,
    })
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "gpt_neox_tiny.json")
with open(path, "w") as f:
    json.dump({"cases": cases}, f)
print("wrote", path, "losses", [c["loss"] for c in cases], "PyTorch f32 gradient errors",
      [c["torch_f32_grad_error"] for c in cases])
