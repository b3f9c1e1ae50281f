#!/usr/bin/python3
"""Writes tests/golden/t5_tiny.json: two tiny T5ForConditionalGeneration models written here in plain
PyTorch from Hugging Face's conventions (modeling_t5.py), with their weights, a padded batch, the
logits, the encoder's last hidden state, the loss and every parameter gradient, in f64 from weights
exact in f32:
  t5_v1_0  feed_forward_proj "relu" (DenseReluDense: wi, relu, wo), tie_word_embeddings true: the
           decoder's output times d_model**-0.5, then shared.weight as the head (no lm_head.weight)
  t5_v1_1  feed_forward_proj "gated-gelu" (DenseGatedActDense: gelu_new(wi_0 x) * wi_1 x, then wo),
           tie_word_embeddings false: lm_head.weight (vocab, d_model), no scaling
The conventions, as Hugging Face's:
  - one shared embedding for the encoder's and the decoder's inputs, not scaled; dropout 0 throughout
  - pre-norm blocks: x + Sublayer(T5LayerNorm(x)); T5LayerNorm is x * rsqrt(mean(x^2) + eps) * weight
    (no mean subtraction, no bias); each stack ends with its final_layer_norm
  - attention: q, k, v (inner_dim, d_model) and o (d_model, inner_dim) without bias, inner_dim =
    num_heads * d_kv (24 here, not d_model); scores = q k^T + position_bias, NO 1/sqrt(d_kv) scaling
  - position_bias = relative_attention_bias[bucket(memory_position - query_position)] (an Embedding
    (num_buckets, num_heads) held by block 0 of each stack only, reused by every block of that stack)
    plus the extended mask (1 - mask) * finfo(dtype).min; the encoder's buckets are bidirectional,
    the decoder's unidirectional; cross-attention (EncDecAttention) has no relative bias, only the
    encoder's padding mask on the keys; the decoder's self-attention mask is causal AND
    decoder_attention_mask on the keys, as one product before (1 - m) * min
  - relative_bucket() below is _relative_position_bucket exactly, the f32 log included
  - loss: cross-entropy over the rows whose label is not -100, their mean
  - decoder_input_ids = [decoder_start_token_id (0)] + labels[:-1], -100 replaced by pad 0
Two departures from modeling_t5.py, which only matter in f64: Hugging Face runs T5LayerNorm's variance
and the attention softmax in f32 even for an f64 model; here both are in the model's dtype, so the f64
reference is f64 throughout.
Rows of the encoder hold 10, 7 and 4 real tokens then pads (id 0), of the decoder 7, 5 and 3 labels then
-100; real ids are drawn from [2, 64), so neither pad (0) nor eos (1) occurs among them. Distances up to
9 (encoder) and 6 (decoder) reach the log-spaced buckets (8 buckets, max_distance 20): the encoder uses
all 8, the decoder 0..5 (buckets 6 and 7 get a zero gradient).
To keep the committed file small the weights are multiples of 2^-8 (exact in f32 and short in decimal)
and the outputs and gradients are written to 12 significant digits (relative 5e-13, far below an f64
test's 1e-9).
Run with Debian's python3-torch: /usr/bin/python3 scripts/make_t5_golden.py"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(5151)
V, D_MODEL, H, D_KV, D_FF = 64, 32, 4, 6, 40
INNER = H * D_KV
N_ENC, N_DEC = 2, 3
BUCKETS, MAX_DISTANCE = 8, 20
EPS = 1e-6
PAD, EOS, START = 0, 1, 0
B, T_ENC, T_DEC = 3, 10, 7
ENC_LENGTHS = [10, 7, 4]
DEC_LENGTHS = [7, 5, 3]
SIG_DIGITS = 12

CASES = [
    {"name": "t5_v1_0", "feed_forward_proj": "relu", "tie": True},
    {"name": "t5_v1_1", "feed_forward_proj": "gated-gelu", "tie": False},
]


def quantized(t):
    # Multiples of 2^-8: exact in f32 (so the f32 model computes with the reference's very weights), and
    # at most 8 decimals in the JSON.
    return (torch.round(t * 256) / 256).float().double().requires_grad_(True)


def param(*shape, std=0.2):
    return quantized(torch.randn(*shape, dtype=torch.float64) * std)


def norm_weight():
    return quantized(1 + 0.1 * torch.randn(D_MODEL, dtype=torch.float64))


def gated(case):
    return case["feed_forward_proj"].startswith("gated-")


def ff_weights(w, p, case):
    if gated(case):
        w[p + "DenseReluDense.wi_0.weight"] = param(D_FF, D_MODEL)
        w[p + "DenseReluDense.wi_1.weight"] = param(D_FF, D_MODEL)
    else:
        w[p + "DenseReluDense.wi.weight"] = param(D_FF, D_MODEL)
    w[p + "DenseReluDense.wo.weight"] = param(D_MODEL, D_FF)
    w[p + "layer_norm.weight"] = norm_weight()


def attention_weights(w, p):
    # q and k at std 0.1: with no 1/sqrt(d_kv) the scores spread about 0.8 before the relative bias.
    w[p + "q.weight"] = param(INNER, D_MODEL, std=0.1)
    w[p + "k.weight"] = param(INNER, D_MODEL, std=0.1)
    w[p + "v.weight"] = param(INNER, D_MODEL, std=0.15)
    w[p + "o.weight"] = param(D_MODEL, INNER, std=0.15)


def weights(case):
    # The shared embedding at std 0.5: tied (times d_model**-0.5 after a unit-RMS norm) the logits spread
    # about 0.5; the untied head at 0.13 gives about 0.7. The relative bias at 0.5 so it matters.
    w = {"shared.weight": param(V, D_MODEL, std=0.5)}
    for i in range(N_ENC):
        p = f"encoder.block.{i}."
        attention_weights(w, p + "layer.0.SelfAttention.")
        if i == 0:
            w[p + "layer.0.SelfAttention.relative_attention_bias.weight"] = param(BUCKETS, H, std=0.5)
        w[p + "layer.0.layer_norm.weight"] = norm_weight()
        ff_weights(w, p + "layer.1.", case)
    w["encoder.final_layer_norm.weight"] = norm_weight()
    for i in range(N_DEC):
        p = f"decoder.block.{i}."
        attention_weights(w, p + "layer.0.SelfAttention.")
        if i == 0:
            w[p + "layer.0.SelfAttention.relative_attention_bias.weight"] = param(BUCKETS, H, std=0.5)
        w[p + "layer.0.layer_norm.weight"] = norm_weight()
        attention_weights(w, p + "layer.1.EncDecAttention.")
        w[p + "layer.1.layer_norm.weight"] = norm_weight()
        ff_weights(w, p + "layer.2.", case)
    w["decoder.final_layer_norm.weight"] = norm_weight()
    if not case["tie"]:
        w["lm_head.weight"] = param(V, D_MODEL, std=0.13)
    return w


def batch():
    """input_ids, attention_mask, decoder_input_ids, decoder_attention_mask, labels."""
    ids = torch.full((B, T_ENC), PAD, dtype=torch.long)
    mask = torch.zeros(B, T_ENC, dtype=torch.long)
    labels = torch.full((B, T_DEC), -100, dtype=torch.long)
    dmask = torch.zeros(B, T_DEC, dtype=torch.long)
    for r in range(B):
        ids[r, :ENC_LENGTHS[r]] = torch.randint(2, V, (ENC_LENGTHS[r],))
        mask[r, :ENC_LENGTHS[r]] = 1
        labels[r, :DEC_LENGTHS[r]] = torch.randint(2, V, (DEC_LENGTHS[r],))
        dmask[r, :DEC_LENGTHS[r]] = 1
    # T5's _shift_right.
    dec = torch.full((B, T_DEC), START, dtype=torch.long)
    dec[:, 1:] = labels[:, :-1]
    dec = dec.masked_fill(dec == -100, PAD)
    return ids, mask, dec, dmask, labels


def relative_bucket(relative_position, bidirectional, num_buckets=BUCKETS, max_distance=MAX_DISTANCE):
    """Hugging Face's T5Attention._relative_position_bucket, step by step (the log in f32, as there)."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    if_large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                            * (num_buckets - max_exact)).to(torch.long)
    if_large = torch.min(if_large, torch.full_like(if_large, num_buckets - 1))
    return buckets + torch.where(is_small, relative_position, if_large)


def relative_bucket_scalar(rel, bidirectional, num_buckets, max_distance):
    """The same formula, one Python int at a time, in f64: the independent second path."""
    offset = 0
    if bidirectional:
        num_buckets //= 2
        if rel > 0:
            offset = num_buckets
        n = abs(rel)
    else:
        n = max(-rel, 0)
    exact = num_buckets // 2
    if n < exact:
        return offset + n
    return offset + min(num_buckets - 1, exact + int(math.floor(math.log(n / exact) / math.log(max_distance / exact)
                                                                  * (num_buckets - exact))))


def check_buckets():
    for bidirectional in (True, False):
        for nb, md in ((BUCKETS, MAX_DISTANCE), (32, 128), (16, 50), (8, 10)):
            rel = torch.arange(-200, 201)
            got = relative_bucket(rel, bidirectional, nb, md).tolist()
            want = [relative_bucket_scalar(r, bidirectional, nb, md) for r in rel.tolist()]
            assert got == want, (bidirectional, nb, md)
    # By hand for this config (memory - query from -9 to 9): bidirectional 4 buckets a side, exact below 2,
    # 2 + floor(2 log(d/2) / log 10) beyond (d = 2..6 -> 2, 7.. -> 3), +4 for keys after the query.
    enc = relative_bucket(torch.arange(-9, 10), True).tolist()
    assert enc == [3, 3, 3, 2, 2, 2, 2, 2, 1, 0, 5, 6, 6, 6, 6, 6, 7, 7, 7], enc
    # Unidirectional: 8 buckets of the past, exact below 4, 4 + floor(4 log(d/4) / log 5) beyond
    # (d = 4, 5 -> 4, 6 -> 5); keys after the query (masked anyway) -> 0.
    dec = relative_bucket(torch.arange(-6, 4), False).tolist()
    assert dec == [5, 4, 4, 3, 2, 1, 0, 0, 0, 0], dec


def position_bias(table, q_len, k_len, bidirectional):
    """(1, H, q_len, k_len): relative_attention_bias at bucket(memory_position - query_position)."""
    rel = torch.arange(k_len)[None, :] - torch.arange(q_len)[:, None]
    return table[relative_bucket(rel, bidirectional)].permute(2, 0, 1).unsqueeze(0)


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def attention(w, p, x, kv, bias):
    def heads(name, t):
        return (t @ w[p + name + ".weight"].t()).view(B, t.shape[1], H, D_KV).transpose(1, 2)

    q, k, v = heads("q", x), heads("k", kv), heads("v", kv)
    scores = q @ k.transpose(-2, -1) + bias  # no 1/sqrt(d_kv)
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, x.shape[1], INNER)
    return y @ w[p + "o.weight"].t()


def feed_forward(w, p, x, case):
    if gated(case):
        h = gelu_new(x @ w[p + "wi_0.weight"].t()) * (x @ w[p + "wi_1.weight"].t())
    else:
        h = torch.relu(x @ w[p + "wi.weight"].t())
    return h @ w[p + "wo.weight"].t()


def forward(case, w, ids, mask, dec, dmask):
    """(logits (B, T_dec, V), encoder last hidden state (B, T_enc, d_model))."""
    dt = w["shared.weight"].dtype
    neg = torch.finfo(dt).min
    emb = w["shared.weight"]
    # Encoder.
    enc_ext = (1.0 - mask[:, None, None, :].to(dt)) * neg  # (B, 1, 1, T_enc)
    bias = position_bias(w["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
                         T_ENC, T_ENC, True) + enc_ext
    x = emb[ids]
    for i in range(N_ENC):
        p = f"encoder.block.{i}.layer."
        x = x + attention(w, p + "0.SelfAttention.", rms_norm(x, w[p + "0.layer_norm.weight"]),
                          rms_norm(x, w[p + "0.layer_norm.weight"]), bias)
        x = x + feed_forward(w, p + "1.DenseReluDense.", rms_norm(x, w[p + "1.layer_norm.weight"]), case)
    enc = rms_norm(x, w["encoder.final_layer_norm.weight"])
    # Decoder.
    causal = torch.tril(torch.ones(T_DEC, T_DEC, dtype=dt))
    dec_ext = (1.0 - causal[None, None] * dmask[:, None, None, :].to(dt)) * neg  # (B, 1, T_dec, T_dec)
    self_bias = position_bias(w["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
                              T_DEC, T_DEC, False) + dec_ext
    cross_bias = torch.zeros(1, H, T_DEC, T_ENC, dtype=dt) + enc_ext
    y = emb[dec]
    for i in range(N_DEC):
        p = f"decoder.block.{i}.layer."
        n = rms_norm(y, w[p + "0.layer_norm.weight"])
        y = y + attention(w, p + "0.SelfAttention.", n, n, self_bias)
        y = y + attention(w, p + "1.EncDecAttention.", rms_norm(y, w[p + "1.layer_norm.weight"]), enc, cross_bias)
        y = y + feed_forward(w, p + "2.DenseReluDense.", rms_norm(y, w[p + "2.layer_norm.weight"]), case)
    y = rms_norm(y, w["decoder.final_layer_norm.weight"])
    if case["tie"]:
        logits = (y * D_MODEL ** -0.5) @ emb.t()
    else:
        logits = y @ w["lm_head.weight"].t()
    return logits, enc


def loss_of(logits, labels):
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)


def f32_error(case, w, inputs, labels):
    """The same model run by PyTorch in f32: the largest gradient error against the f64 gradients,
    |g32 - g64| / max(|g64|, 0.1 max|g64|) (the C++ test's measure): what f32 arithmetic reaches."""
    w32 = {k: t.detach().float().requires_grad_(True) for k, t in w.items()}
    logits, _ = forward(case, w32, *inputs)
    loss_of(logits, labels).backward()

    def rel(got, ref):
        denom = torch.maximum(ref.abs(), 0.1 * ref.abs().max())
        return ((got.double() - ref).abs() / denom).max().item()

    worst = max(rel(w32[k].grad, t.grad) for k, t in w.items())
    with torch.no_grad():
        logits64, _ = forward(case, w, *inputs)
    return worst, rel(logits.detach(), logits64)


def self_checks(case, w, inputs, logits):
    ids, mask, dec, dmask = inputs
    with torch.no_grad():
        # The relative bias matters.
        w0 = dict(w)
        for k in w0:
            if k.endswith("relative_attention_bias.weight"):
                w0[k] = torch.zeros_like(w[k])
        diff = (forward(case, w0, *inputs)[0] - logits).abs().max().item()
        assert diff > 0.1, diff
        # Pads do not leak: other ids at the encoder's pads and the decoder's masked positions change
        # no logit of a real decoder position.
        ids2 = ids.masked_fill(mask == 0, 7)
        dec2 = dec.clone()
        for r in range(B):
            dec2[r, DEC_LENGTHS[r]:] = 9
        l2, _ = forward(case, w, ids2, mask, dec2, dmask)
        real = dmask.bool()
        leak = (l2 - logits)[real].abs().max().item()
        assert leak < 1e-12, leak
    return diff


def rounded(t):
    return [float(f"{v:.{SIG_DIGITS}g}") for v in t.detach().flatten().tolist()]


check_buckets()
cases = []
for case in CASES:
    w = weights(case)
    ids, mask, dec, dmask, labels = batch()
    inputs = (ids, mask, dec, dmask)
    logits, enc = forward(case, w, *inputs)
    loss = loss_of(logits, labels)
    loss.backward()
    bias_effect = self_checks(case, w, inputs, logits.detach())
    torch_f32, torch_f32_logits = f32_error(case, w, inputs, labels)
    act = "gelu_new" if gated(case) else "relu"
    out = {
        "config": {"name": case["name"], "model_type": "t5", "architectures": ["T5ForConditionalGeneration"],
                   "vocab_size": V, "d_model": D_MODEL, "d_kv": D_KV, "d_ff": D_FF, "num_layers": N_ENC,
                   "num_decoder_layers": N_DEC, "num_heads": H, "relative_attention_num_buckets": BUCKETS,
                   "relative_attention_max_distance": MAX_DISTANCE, "dropout_rate": 0.0,
                   "layer_norm_epsilon": EPS, "initializer_factor": 1.0,
                   "feed_forward_proj": case["feed_forward_proj"], "dense_act_fn": act, "is_gated_act": gated(case),
                   "is_encoder_decoder": True, "tie_word_embeddings": case["tie"], "use_cache": False,
                   "pad_token_id": PAD, "eos_token_id": EOS, "decoder_start_token_id": START},
        "input_ids": ids.tolist(), "attention_mask": mask.tolist(), "decoder_input_ids": dec.tolist(),
        "decoder_attention_mask": dmask.tolist(), "labels": labels.tolist(),
        "weights": {k: {"shape": list(t.shape), "data": t.detach().flatten().tolist()} for k, t in w.items()},
        "logits": rounded(logits),
        "encoder_last_hidden_state": rounded(enc),
        "loss": loss.item(),
        "grads": {k: rounded(t.grad) for k, t in w.items()},
        "torch_f32_grad_error": torch_f32,
        "torch_f32_logit_error": torch_f32_logits,
    }
    cases.append(out)
    print(case["name"], "loss", out["loss"], "PyTorch f32 gradient error", torch_f32, "logit error", torch_f32_logits,
          "largest |grad| f64", max(t.grad.abs().max().item() for t in w.values()),
          "smallest tensor max|grad|", min(t.grad.abs().max().item() for t in w.values()),
          "logit std", logits.detach().std().item(), "relative bias moves logits by", bias_effect,
          "parameters", sum(t.numel() for t in w.values()))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "t5_tiny.json")
with open(path, "w") as f:
    json.dump({"cases": cases}, f, separators=(",", ":"))
print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes; log V", math.log(V))
