#!/usr/bin/python3
"""Writes tests/golden/llama_tiny.json: three tiny Llama-family models written here in plain PyTorch
from Hugging Face's conventions (LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM: RMSNorm in
the input dtype's f32 path, rotate-half rotary embeddings, grouped-query attention by repeating the
key/value heads, SwiGLU MLP), with their weights, a batch, the logits, the loss and every parameter
gradient, in f64 from weights exact in f32:
  llama    4 heads over 2 key/value heads, untied output projection, Llama 3.1 rope scaling
  qwen2    q/k/v biases, tied output projection, 4 heads over 1 key/value head, rope_theta 1e6
  mistral  sliding window 3 over a sequence of 9, 4 heads over 2 key/value heads
Run with Debian's python3-torch: /usr/bin/python3 scripts/make_llama_golden.py"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(4321)
V, C, L, H, F_ = 61, 32, 2, 4, 48
D = C // H
B, T = 2, 9

CASES = [
    {"name": "llama", "kv_heads": 2, "tie": False, "qkv_bias": False, "window": 0, "theta": 10000.0,
     "llama3": {"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
    {"name": "qwen2", "kv_heads": 1, "tie": True, "qkv_bias": True, "window": 0, "theta": 1.0e6, "llama3": None},
    {"name": "mistral", "kv_heads": 2, "tie": False, "qkv_bias": False, "window": 3, "theta": 10000.0, "llama3": None},
]
EPS = 1e-5


def param(*shape, std=0.02):
    # Values exact in f32, so the f32 model computes with the reference's very weights.
    return (torch.randn(*shape, dtype=torch.float64) * std).float().double().requires_grad_(True)


def norm_weight():
    return (1 + 0.1 * torch.randn(C, dtype=torch.float64)).float().double().requires_grad_(True)


def weights(case):
    KV = case["kv_heads"] * D
    w = {"model.embed_tokens.weight": param(V, C, std=0.3)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm_weight()
        for proj, rows in (("q_proj", H * D), ("k_proj", KV), ("v_proj", KV)):
            w[p + f"self_attn.{proj}.weight"] = param(rows, C, std=0.2)
            if case["qkv_bias"]:
                w[p + f"self_attn.{proj}.bias"] = param(rows, std=0.1)
        w[p + "self_attn.o_proj.weight"] = param(C, H * D, std=0.2)
        w[p + "post_attention_layernorm.weight"] = norm_weight()
        w[p + "mlp.gate_proj.weight"] = param(F_, C, std=0.2)
        w[p + "mlp.up_proj.weight"] = param(F_, C, std=0.2)
        w[p + "mlp.down_proj.weight"] = param(C, F_, std=0.2)
    w["model.norm.weight"] = norm_weight()
    if not case["tie"]:
        w["lm_head.weight"] = param(V, C, std=0.3)
    return w


def inv_freq(case):
    f = 1.0 / (case["theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    s = case["llama3"]
    if s is None:
        return f
    # Llama 3.1: long wavelengths slowed by `factor`, short ones kept, the band between blended.
    context = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = context / s["low_freq_factor"], context / s["high_freq_factor"]
    out = []
    for x in f.tolist():
        wavelen = 2 * math.pi / x
        if wavelen < high_wavelen:
            out.append(x)
        elif wavelen > low_wavelen:
            out.append(x / s["factor"])
        else:
            smooth = (context / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
            out.append((1 - smooth) * x / s["factor"] + smooth * x)
    return torch.tensor(out, dtype=torch.float64)


def rms_norm(x, weight):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rotate_half(x):
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(case, w, ids):
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq(case))
    emb = torch.cat((freqs, freqs), dim=-1)
    dt = w["model.norm.weight"].dtype
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    allowed = j <= i
    if case["window"] > 0:
        allowed = allowed & (j > i - case["window"])
    KVH = case["kv_heads"]
    x = w["model.embed_tokens.weight"][ids]
    for layer in range(L):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])

        def proj(name, heads):
            y = h @ w[p + f"self_attn.{name}.weight"].t()
            if case["qkv_bias"]:
                y = y + w[p + f"self_attn.{name}.bias"]
            return y.view(B, T, heads, D).transpose(1, 2)

        q, k, v = proj("q_proj", H), proj("k_proj", KVH), proj("v_proj", KVH)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // KVH, dim=1), v.repeat_interleave(H // KVH, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~allowed, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)
        x = x + y @ w[p + "self_attn.o_proj.weight"].t()
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        m = F.silu(h @ w[p + "mlp.gate_proj.weight"].t()) * (h @ w[p + "mlp.up_proj.weight"].t())
        x = x + m @ w[p + "mlp.down_proj.weight"].t()
    x = rms_norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if case["tie"] else w["lm_head.weight"]
    return x @ head.t()


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
    w = weights(case)
    ids = torch.randint(0, V, (B, T))
    labels = torch.randint(0, V, (B, T))
    labels[1, 2] = -100  # an ignored position
    logits = forward(case, w, ids)
    loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    torch_f32 = f32_error(case, w, ids, labels)
    cases.append({
        "config": {"name": case["name"], "vocab_size": V, "hidden_size": C, "num_layers": L, "num_attention_heads": H,
                   "num_key_value_heads": case["kv_heads"], "ffn_hidden_size": F_, "max_seq_length": 16,
                   "rms_norm_eps": EPS, "rope_theta": case["theta"], "llama3": case["llama3"],
                   "tie_word_embeddings": case["tie"], "qkv_bias": case["qkv_bias"], "sliding_window": case["window"]},
        "ids": ids.tolist(), "labels": labels.tolist(),
        "weights": {k: {"shape": list(t.shape), "data": t.detach().flatten().tolist()} for k, t in w.items()},
        "logits": logits.detach().flatten().tolist(),
        "loss": loss.item(),
        "grads": {k: t.grad.flatten().tolist() for k, t in w.items()},
        "torch_f32_grad_error": torch_f32,
    })
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "llama_tiny.json")
with open(path, "w") as f:
    json.dump({"cases": cases}, f)
print("wrote", path, "losses", [c["loss"] for c in cases], "PyTorch f32 gradient errors",
      [c["torch_f32_grad_error"] for c in cases])
