#!/usr/bin/python3
"""Writes tests/golden/bert_tiny.json: three tiny encoder models written here in plain PyTorch from
Hugging Face's conventions (BertForPreTraining, RobertaForMaskedLM, BertForSequenceClassification:
post-LayerNorm residual blocks with eps 1e-12, exact erf GELU, learned absolute position embeddings,
token-type embeddings, the extended attention mask (1 - mask) * finfo(dtype).min added to the
scores, the MLM head dense -> GELU -> LayerNorm -> decoder tied to the word embeddings plus its own
bias, the pooler dense + tanh on token 0), with their weights, a padded batch, the logits, the
encoder's last hidden state, the losses and every parameter gradient, in f64 from weights exact in f32:
  bert_pretraining     MLM logits and NSP logits, loss = masked_lm_loss + next_sentence_loss
  roberta_mlm          RoBERTa positions (padding_idx + cumsum over real tokens, padding_idx at pads),
                       one token type, pad id 1, no pooler
  bert_classification  pooler -> Linear(C, 3), cross-entropy over the rows
Rows hold 9, 6 and 4 real tokens followed by pads; pad ids never occur among the real tokens.
Run with Debian's python3-torch: /usr/bin/python3 scripts/make_bert_golden.py"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(2718)
V, C, L, H, F_ = 61, 32, 2, 4, 48
D = C // H
B, T = 3, 9
EPS = 1e-12
LENGTHS = [9, 6, 4]
SEGMENT_B = [5, 3, 2]  # first position of segment B (token type 1) in each row, BERT only
NUM_LABELS = 3

CASES = [
    {"name": "bert_pretraining", "model_type": "bert", "task": "pretraining", "prefix": "bert.",
     "positions": 16, "types": 2, "pad": 0, "mask_token": 3},
    {"name": "roberta_mlm", "model_type": "roberta", "task": "mlm", "prefix": "roberta.",
     "positions": 16 + 2, "types": 1, "pad": 1, "mask_token": V - 1},
    {"name": "bert_classification", "model_type": "bert", "task": "classification", "prefix": "bert.",
     "positions": 16, "types": 2, "pad": 0, "mask_token": 3},
]


def param(*shape, std=0.2):
    # Values exact in f32, so the f32 model computes with the reference's very weights.
    return (torch.randn(*shape, dtype=torch.float64) * std).float().double().requires_grad_(True)


def ln_weight(n=C):
    return (1 + 0.1 * torch.randn(n, dtype=torch.float64)).float().double().requires_grad_(True)


def ln_bias(n=C):
    return param(n, std=0.1)


def weights(case):
    p = case["prefix"]
    # Word embeddings at std 0.15: they are also the tied decoder, so the logits spread about 1 and the
    # MLM loss starts near log V.
    w = {p + "embeddings.word_embeddings.weight": param(V, C, std=0.15),
         p + "embeddings.position_embeddings.weight": param(case["positions"], C, std=0.3),
         p + "embeddings.token_type_embeddings.weight": param(case["types"], C, std=0.3),
         p + "embeddings.LayerNorm.weight": ln_weight(),
         p + "embeddings.LayerNorm.bias": ln_bias()}
    for i in range(L):
        q = p + f"encoder.layer.{i}."
        for proj in ("query", "key", "value"):
            w[q + f"attention.self.{proj}.weight"] = param(C, C)
            w[q + f"attention.self.{proj}.bias"] = param(C, std=0.1)
        w[q + "attention.output.dense.weight"] = param(C, C)
        w[q + "attention.output.dense.bias"] = param(C, std=0.1)
        w[q + "attention.output.LayerNorm.weight"] = ln_weight()
        w[q + "attention.output.LayerNorm.bias"] = ln_bias()
        w[q + "intermediate.dense.weight"] = param(F_, C)
        w[q + "intermediate.dense.bias"] = param(F_, std=0.1)
        w[q + "output.dense.weight"] = param(C, F_)
        w[q + "output.dense.bias"] = param(C, std=0.1)
        w[q + "output.LayerNorm.weight"] = ln_weight()
        w[q + "output.LayerNorm.bias"] = ln_bias()
    if case["task"] in ("pretraining", "classification"):
        w[p + "pooler.dense.weight"] = param(C, C)
        w[p + "pooler.dense.bias"] = param(C, std=0.1)
    if case["task"] == "pretraining":
        w["cls.predictions.transform.dense.weight"] = param(C, C)
        w["cls.predictions.transform.dense.bias"] = param(C, std=0.1)
        w["cls.predictions.transform.LayerNorm.weight"] = ln_weight()
        w["cls.predictions.transform.LayerNorm.bias"] = ln_bias()
        w["cls.predictions.bias"] = param(V, std=0.1)
        w["cls.seq_relationship.weight"] = param(2, C)
        w["cls.seq_relationship.bias"] = param(2, std=0.1)
    elif case["task"] == "mlm":
        w["lm_head.dense.weight"] = param(C, C)
        w["lm_head.dense.bias"] = param(C, std=0.1)
        w["lm_head.layer_norm.weight"] = ln_weight()
        w["lm_head.layer_norm.bias"] = ln_bias()
        w["lm_head.bias"] = param(V, std=0.1)
    else:
        w["classifier.weight"] = param(NUM_LABELS, C)
        w["classifier.bias"] = param(NUM_LABELS, std=0.1)
    return w


def batch(case):
    """ids, token types, attention mask, MLM labels (or class labels), next-sentence labels."""
    pad = case["pad"]
    real = [t for t in range(V) if t != pad]
    mask = torch.zeros(B, T, dtype=torch.long)
    ids = torch.full((B, T), pad, dtype=torch.long)
    types = torch.zeros(B, T, dtype=torch.long)
    mlm = torch.full((B, T), -100, dtype=torch.long)
    for r, n in enumerate(LENGTHS):
        mask[r, :n] = 1
        ids[r, :n] = torch.tensor(real)[torch.randint(0, len(real), (n,))]
        if case["types"] > 1:
            types[r, SEGMENT_B[r]:n] = 1
        if case["task"] != "classification":
            # Three predicted tokens among the real ones after the first; two of them shown as the mask token.
            chosen = (1 + torch.randperm(n - 1)[:3]).tolist()
            for k, t in enumerate(sorted(chosen)):
                mlm[r, t] = real[torch.randint(0, len(real), (1,)).item()]
                if k < 2:
                    ids[r, t] = case["mask_token"]
    nsp = torch.tensor([0, 1, 1])
    labels = torch.tensor([2, 0, 1]) if case["task"] == "classification" else mlm
    return ids, types, mask, labels, nsp


def layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)  # biased, as nn.LayerNorm
    return (x - mean) / torch.sqrt(var + EPS) * weight + bias


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def linear(w, name, x):
    return x @ w[name + ".weight"].t() + w[name + ".bias"]


def position_ids(case, ids):
    if case["model_type"] == "roberta":
        real = (ids != case["pad"]).long()
        return torch.cumsum(real, dim=1) * real + case["pad"]
    return torch.arange(T).view(1, T).expand(B, T)


def forward(case, w, ids, types, mask):
    """Returns (prediction logits, seq-relationship logits or None, last hidden state)."""
    p = case["prefix"]
    dt = w[p + "embeddings.LayerNorm.weight"].dtype
    x = (w[p + "embeddings.word_embeddings.weight"][ids]
         + w[p + "embeddings.token_type_embeddings.weight"][types]
         + w[p + "embeddings.position_embeddings.weight"][position_ids(case, ids)])
    x = layer_norm(x, w[p + "embeddings.LayerNorm.weight"], w[p + "embeddings.LayerNorm.bias"])
    ext = (1.0 - mask[:, None, None, :].to(dt)) * torch.finfo(dt).min  # (B, 1, 1, T), as HF
    for layer in range(L):
        q = p + f"encoder.layer.{layer}."

        def heads(name):
            return linear(w, q + f"attention.self.{name}", x).view(B, T, H, D).transpose(1, 2)

        qh, kh, vh = heads("query"), heads("key"), heads("value")
        att = (qh @ kh.transpose(-2, -1)) / math.sqrt(D) + ext
        y = (att.softmax(-1) @ vh).transpose(1, 2).reshape(B, T, C)
        x = layer_norm(linear(w, q + "attention.output.dense", y) + x,
                       w[q + "attention.output.LayerNorm.weight"], w[q + "attention.output.LayerNorm.bias"])
        m = gelu(linear(w, q + "intermediate.dense", x))
        x = layer_norm(linear(w, q + "output.dense", m) + x,
                       w[q + "output.LayerNorm.weight"], w[q + "output.LayerNorm.bias"])
    word = w[p + "embeddings.word_embeddings.weight"]
    if case["task"] == "pretraining":
        h = gelu(linear(w, "cls.predictions.transform.dense", x))
        h = layer_norm(h, w["cls.predictions.transform.LayerNorm.weight"], w["cls.predictions.transform.LayerNorm.bias"])
        logits = h @ word.t() + w["cls.predictions.bias"]
        pooled = torch.tanh(linear(w, p + "pooler.dense", x[:, 0]))
        return logits, linear(w, "cls.seq_relationship", pooled), x
    if case["task"] == "mlm":
        h = gelu(linear(w, "lm_head.dense", x))
        h = layer_norm(h, w["lm_head.layer_norm.weight"], w["lm_head.layer_norm.bias"])
        return h @ word.t() + w["lm_head.bias"], None, x
    pooled = torch.tanh(linear(w, p + "pooler.dense", x[:, 0]))
    return linear(w, "classifier", pooled), None, x


def losses(case, logits, seq, labels, nsp):
    """(total, mlm loss or None, nsp loss or None)."""
    if case["task"] == "classification":
        return F.cross_entropy(logits, labels), None, None
    mlm = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)
    if case["task"] == "mlm":
        return mlm, mlm, None
    ns = F.cross_entropy(seq, nsp)
    return mlm + ns, mlm, ns


def zero_grad_params(case):
    """Parameters whose gradient is exactly zero in exact arithmetic: the attention key biases (q . b_k adds
    the same to every score of a query row, and softmax ignores that). PyTorch's f64 leaves rounding noise
    (about 1e-17) there; the relative measure below is meaningless for them, so they are left out of it
    and listed in the JSON for a test to check against an absolute bound instead."""
    return [case["prefix"] + f"encoder.layer.{i}.attention.self.key.bias" for i in range(L)]


def f32_error(case, w, ids, types, mask, labels, nsp):
    """The same model run by PyTorch in f32: the largest gradient error against the f64 gradients,
    |g32 - g64| / max(|g64|, 0.1 max|g64|) (the C++ test's measure): what f32 arithmetic reaches.
    The key biases (zero_grad_params) are left out."""
    w32 = {k: t.detach().float().requires_grad_(True) for k, t in w.items()}
    logits, seq, _ = forward(case, w32, ids, types, mask)
    losses(case, logits, seq, labels, nsp)[0].backward()
    worst = 0.0
    for k, t in w.items():
        if k in zero_grad_params(case):
            continue
        r = t.grad
        denom = torch.maximum(r.abs(), 0.1 * r.abs().max())
        worst = max(worst, ((w32[k].grad.double() - r).abs() / denom).max().item())
    return worst


cases = []
for case in CASES:
    w = weights(case)
    ids, types, mask, labels, nsp = batch(case)
    logits, seq, hidden = forward(case, w, ids, types, mask)
    loss, mlm_loss, nsp_loss = losses(case, logits, seq, labels, nsp)
    loss.backward()
    torch_f32 = f32_error(case, w, ids, types, mask, labels, nsp)
    out = {
        "config": {"name": case["name"], "model_type": case["model_type"], "vocab_size": V, "hidden_size": C,
                   "num_layers": L, "num_attention_heads": H, "ffn_hidden_size": F_,
                   "max_position_embeddings": case["positions"], "type_vocab_size": case["types"],
                   "layer_norm_eps": EPS, "pad_token_id": case["pad"],
                   "num_labels": NUM_LABELS if case["task"] == "classification" else 0, "task": case["task"]},
        "input_ids": ids.tolist(), "token_type_ids": types.tolist(), "attention_mask": mask.tolist(),
        "labels": labels.tolist(),
    }
    if case["task"] == "pretraining":
        out["next_sentence_label"] = nsp.tolist()
    out["weights"] = {k: {"shape": list(t.shape), "data": t.detach().flatten().tolist()} for k, t in w.items()}
    out["logits"] = logits.detach().flatten().tolist()
    if seq is not None:
        out["seq_relationship_logits"] = seq.detach().flatten().tolist()
    out["hidden_states"] = hidden.detach().flatten().tolist()
    if mlm_loss is not None:
        out["mlm_loss"] = mlm_loss.item()
    if nsp_loss is not None:
        out["nsp_loss"] = nsp_loss.item()
    out["loss"] = loss.item()
    out["grads"] = {k: t.grad.flatten().tolist() for k, t in w.items()}
    out["zero_grad_params"] = zero_grad_params(case)
    out["torch_f32_grad_error"] = torch_f32
    cases.append(out)
    print(case["name"], "loss", out["loss"], "mlm_loss", out.get("mlm_loss"), "nsp_loss", out.get("nsp_loss"),
          "PyTorch f32 gradient error", torch_f32,
          "largest |key bias grad| f64", max(w[k].grad.abs().max().item() for k in zero_grad_params(case)),
          "largest |grad| f64", max(t.grad.abs().max().item() for t in w.values()))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "bert_tiny.json")
with open(path, "w") as f:
    json.dump({"cases": cases}, f)
print("wrote", path, "log V", math.log(V), "log 2", math.log(2), "log 3", math.log(3))
