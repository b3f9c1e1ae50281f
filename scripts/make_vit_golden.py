#!/usr/bin/python3
"""Writes tests/golden/vit_tiny.json: a tiny ViTForImageClassification written here in plain PyTorch
from Hugging Face's conventions (modeling_vit.py), with its weights, a batch of images and labels, the
logits, the final layernorm's output, the loss and every parameter gradient, in f64 from weights exact
in f32; and Hugging Face's interpolation of the position embeddings to other image sizes.
The conventions, as Hugging Face's:
  - patch embedding: Conv2d(num_channels, hidden, kernel = stride = patch_size) with bias
    (vit.embeddings.patch_embeddings.projection.weight (C, ch, P, P)), flattened to (B, N, C) with the
    patches in row-major order (patch (r, c) of the (H/P, W/P) grid is token 1 + r * (W/P) + c). As a
    matmul: each patch flattened channel-major, (ch, P, P) -> ch * P * P (index k * P * P + i * P + j for
    pixel (k, y0 + i, x0 + j)), times weight.reshape(C, ch * P * P)^T, plus the bias
  - vit.embeddings.cls_token (1, 1, C) prepended (token 0), vit.embeddings.position_embeddings
    (1, N + 1, C) added (row 0 for the CLS token); dropout 0 throughout
  - pre-LayerNorm blocks vit.encoder.layer.{i}: x + attention.output.dense(Attn(layernorm_before(x))),
    then x + output.dense(gelu(intermediate.dense(layernorm_after(x)))); query, key, value Linear with
    bias, scores q k^T / sqrt(head_dim), bidirectional, no mask; exact erf GELU; LayerNorm eps 1e-12
    (biased variance, as nn.LayerNorm)
  - vit.layernorm on every token; classifier Linear(C, num_labels) on token 0 (the CLS token); loss the
    mean cross-entropy over the B images
  - interpolate_pos_encoding (recent transformers): the CLS row kept, the (n * n, C) patch rows reshaped
    to (1, n, n, C), permuted to (1, C, n, n), torch.nn.functional.interpolate(size=(new_h, new_w),
    mode="bicubic", align_corners=False) (no antialias, no scale_factor), permuted back to
    (1, new_h * new_w, C) and concatenated after the CLS row; new_h = height // patch_size
Attention's key biases get a zero gradient in exact arithmetic (q . b_k adds the same to every score of a
query row); they are left out of the f32 error measure and listed under "zero_grad_params".
To keep the committed file small the weights and pixels are multiples of 2^-8 (exact in f32, short in
decimal) and the gradients and hidden states are written to 14 significant digits (relative 5e-14, far
below an f64 test's 1e-9); the logits, the loss and the interpolation's outputs in full.
Run with Debian's python3-torch: /usr/bin/python3 scripts/make_vit_golden.py"""
import json
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(3141)
IMAGE, P, CH = 12, 4, 3
C, L, H, F_ = 32, 2, 4, 48
D = C // H
NUM_LABELS = 5
B = 3
EPS = 1e-12
GRID = IMAGE // P
N = GRID * GRID
SIG_DIGITS = 14
P_ = "vit."


def quantized(t):
    # Multiples of 2^-8: exact in f32 (so the f32 model computes with the reference's very values), and
    # at most 8 decimals in the JSON.
    return (torch.round(t * 256) / 256).float().double()


def param(*shape, std=0.2):
    return quantized(torch.randn(*shape, dtype=torch.float64) * std).requires_grad_(True)


def ln_weight():
    return quantized(1 + 0.1 * torch.randn(C, dtype=torch.float64)).requires_grad_(True)


def weights():
    e = P_ + "embeddings."
    # The projection at std 0.1: 48 inputs of unit size give patch embeddings of about 0.7.
    w = {e + "cls_token": param(1, 1, C, std=0.3),
         e + "position_embeddings": param(1, N + 1, C, std=0.3),
         e + "patch_embeddings.projection.weight": param(C, CH, P, P, std=0.1),
         e + "patch_embeddings.projection.bias": param(C, std=0.1)}
    for i in range(L):
        q = P_ + f"encoder.layer.{i}."
        w[q + "layernorm_before.weight"] = ln_weight()
        w[q + "layernorm_before.bias"] = param(C, std=0.1)
        for proj in ("query", "key", "value"):
            w[q + f"attention.attention.{proj}.weight"] = param(C, C)
            w[q + f"attention.attention.{proj}.bias"] = param(C, std=0.1)
        w[q + "attention.output.dense.weight"] = param(C, C)
        w[q + "attention.output.dense.bias"] = param(C, std=0.1)
        w[q + "layernorm_after.weight"] = ln_weight()
        w[q + "layernorm_after.bias"] = param(C, std=0.1)
        w[q + "intermediate.dense.weight"] = param(F_, C)
        w[q + "intermediate.dense.bias"] = param(F_, std=0.1)
        w[q + "output.dense.weight"] = param(C, F_, std=0.15)
        w[q + "output.dense.bias"] = param(C, std=0.1)
    w[P_ + "layernorm.weight"] = ln_weight()
    w[P_ + "layernorm.bias"] = param(C, std=0.1)
    # The classifier at std 0.15: after the final layernorm the logits spread about 0.8.
    w["classifier.weight"] = param(NUM_LABELS, C, std=0.15)
    w["classifier.bias"] = param(NUM_LABELS, std=0.1)
    return w


def layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)  # biased, as nn.LayerNorm
    return (x - mean) / torch.sqrt(var + EPS) * weight + bias


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def linear(w, name, x):
    return x @ w[name + ".weight"].t() + w[name + ".bias"]


def patch_embed(w, pixels):
    """Conv2d(kernel = stride = P) -> (B, ch', h, w') -> flatten(2) -> transpose(1, 2): (B, h * w', C)."""
    e = P_ + "embeddings.patch_embeddings.projection."
    y = F.conv2d(pixels, w[e + "weight"], w[e + "bias"], stride=P)
    return y.flatten(2).transpose(1, 2)


def patch_embed_unfold(w, pixels):
    """The same as an explicit matmul: patches in row-major grid order, each flattened (ch, P, P)."""
    e = P_ + "embeddings.patch_embeddings.projection."
    b, ch, hh, ww = pixels.shape
    gh, gw = hh // P, ww // P
    patches = pixels.reshape(b, ch, gh, P, gw, P).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, ch * P * P)
    return patches @ w[e + "weight"].reshape(C, ch * P * P).t() + w[e + "bias"]


def interpolate_pos_encoding(pos, new_h, new_w):
    """ViTEmbeddings.interpolate_pos_encoding's arithmetic: (1, 1 + n * n, C) -> (1, 1 + new_h * new_w, C)."""
    cls_pos, patch_pos = pos[:, :1], pos[:, 1:]
    n = int(round(math.sqrt(patch_pos.shape[1])))
    dim = pos.shape[-1]
    patch_pos = patch_pos.reshape(1, n, n, dim).permute(0, 3, 1, 2)
    patch_pos = F.interpolate(patch_pos, size=(new_h, new_w), mode="bicubic", align_corners=False)
    patch_pos = patch_pos.permute(0, 2, 3, 1).reshape(1, -1, dim)
    return torch.cat((cls_pos, patch_pos), dim=1)


def cubic_weights(t, a=-0.75):
    """PyTorch's upsample_bicubic2d kernel (Keys, A = -0.75) for the 4 taps at offsets -1, 0, 1, 2."""
    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def bicubic_scalar(grid, new_h, new_w):
    """An independent second path: (n, m) list of lists -> (new_h, new_w), align_corners False:
    src = (dst + 0.5) * in / out - 0.5 (not clamped), taps floor(src) - 1 .. + 2 clamped to the border."""
    n, m = len(grid), len(grid[0])

    def taps(dst, size_in, size_out):
        src = (dst + 0.5) * size_in / size_out - 0.5
        x0 = math.floor(src)
        ws = cubic_weights(src - x0)
        return [(min(max(x0 - 1 + k, 0), size_in - 1), ws[k]) for k in range(4)]

    out = []
    for y in range(new_h):
        row = []
        for x in range(new_w):
            row.append(sum(wy * wx * grid[iy][ix] for iy, wy in taps(y, n, new_h) for ix, wx in taps(x, m, new_w)))
        out.append(row)
    return out


def forward(w, pixels, interpolate=False):
    """(logits (B, num_labels), final layernorm output (B, N + 1, C))."""
    e = P_ + "embeddings."
    pixels = pixels.to(w[e + "cls_token"].dtype)
    b, _, hh, ww = pixels.shape
    x = patch_embed(w, pixels)
    x = torch.cat((w[e + "cls_token"].expand(b, -1, -1), x), dim=1)
    pos = w[e + "position_embeddings"]
    if interpolate:
        pos = interpolate_pos_encoding(pos, hh // P, ww // P)
    x = x + pos
    t = x.shape[1]
    for i in range(L):
        q = P_ + f"encoder.layer.{i}."
        h = layer_norm(x, w[q + "layernorm_before.weight"], w[q + "layernorm_before.bias"])

        def heads(name):
            return linear(w, q + f"attention.attention.{name}", h).view(b, t, H, D).transpose(1, 2)

        qh, kh, vh = heads("query"), heads("key"), heads("value")
        att = (qh @ kh.transpose(-2, -1)) / math.sqrt(D)
        y = (att.softmax(-1) @ vh).transpose(1, 2).reshape(b, t, C)
        x = x + linear(w, q + "attention.output.dense", y)
        h = layer_norm(x, w[q + "layernorm_after.weight"], w[q + "layernorm_after.bias"])
        x = x + linear(w, q + "output.dense", gelu(linear(w, q + "intermediate.dense", h)))
    x = layer_norm(x, w[P_ + "layernorm.weight"], w[P_ + "layernorm.bias"])
    return linear(w, "classifier", x[:, 0]), x


def zero_grad_params():
    return [P_ + f"encoder.layer.{i}.attention.attention.key.bias" for i in range(L)]


def rel(got, ref):
    denom = torch.maximum(ref.abs(), 0.1 * ref.abs().max())
    return ((got.double() - ref).abs() / denom).max().item()


def f32_error(w, pixels, labels):
    """The same model run by PyTorch in f32: the largest gradient error against the f64 gradients,
    |g32 - g64| / max(|g64|, 0.1 max|g64|) (the C++ test's measure), the key biases left out; and the
    logits' error by the same measure."""
    w32 = {k: t.detach().float().requires_grad_(True) for k, t in w.items()}
    logits, _ = forward(w32, pixels)
    F.cross_entropy(logits, labels).backward()
    worst = max(rel(w32[k].grad, t.grad) for k, t in w.items() if k not in zero_grad_params())
    with torch.no_grad():
        logits64, _ = forward(w, pixels)
    return worst, rel(logits.detach(), logits64)


def rounded(t):
    return [float(f"{v:.{SIG_DIGITS}g}") for v in t.detach().flatten().tolist()]


def flat(t):
    return t.detach().flatten().tolist()


w = weights()
pixels = quantized(torch.randn(B, CH, IMAGE, IMAGE, dtype=torch.float64))
labels = torch.tensor([3, 0, 4])
logits, hidden = forward(w, pixels)
loss = F.cross_entropy(logits, labels)
loss.backward()
torch_f32, torch_f32_logits = f32_error(w, pixels, labels)

with torch.no_grad():
    # The patch embedding equals the explicit unfold + matmul.
    patch_diff = (patch_embed(w, pixels) - patch_embed_unfold(w, pixels)).abs().max().item()
    assert patch_diff < 1e-13, patch_diff
    # Interpolation to the same size returns the input unchanged, bit for bit.
    pos = w[P_ + "embeddings.position_embeddings"].detach()
    same = interpolate_pos_encoding(pos, GRID, GRID)
    assert torch.equal(same, pos)
    pos16 = interpolate_pos_encoding(pos, 16 // P, 16 // P)
    pos8 = interpolate_pos_encoding(pos, 8 // P, 8 // P)
    # F.interpolate agrees with the scalar bicubic formula, channel by channel.
    scalar_diff = 0.0
    for out, g in ((pos16, 16 // P), (pos8, 8 // P)):
        assert torch.equal(out[:, 0], pos[:, 0])
        for c in range(C):
            grid = pos[0, 1:, c].reshape(GRID, GRID).tolist()
            want = torch.tensor(bicubic_scalar(grid, g, g), dtype=torch.float64).flatten()
            scalar_diff = max(scalar_diff, (out[0, 1:, c] - want).abs().max().item())
    assert scalar_diff < 1e-14, scalar_diff
    # The 16 x 16 images through the tiny model with the 4 x 4 interpolated grid.
    pixels16 = quantized(torch.randn(2, CH, 16, 16, dtype=torch.float64))
    logits16, _ = forward(w, pixels16, interpolate=True)
    # Interpolating at the model's own size changes nothing.
    base, _ = forward(w, pixels, interpolate=True)
    assert (base - logits).abs().max().item() == 0.0

out = {
    "config": {"model_type": "vit", "architectures": ["ViTForImageClassification"], "image_size": IMAGE,
               "patch_size": P, "num_channels": CH, "hidden_size": C, "num_hidden_layers": L,
               "num_attention_heads": H, "intermediate_size": F_, "hidden_act": "gelu", "layer_norm_eps": EPS,
               "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "qkv_bias": True,
               "num_labels": NUM_LABELS},
    "pixel_values": {"shape": list(pixels.shape), "data": flat(pixels)},
    "labels": labels.tolist(),
    "weights": {k: {"shape": list(t.shape), "data": flat(t)} for k, t in w.items()},
    "logits": flat(logits),
    "hidden_states": rounded(hidden),
    "loss": loss.item(),
    "grads": {k: rounded(t.grad) for k, t in w.items()},
    "zero_grad_params": zero_grad_params(),
    "torch_f32_grad_error": torch_f32,
    "torch_f32_logit_error": torch_f32_logits,
    "interpolated": {
        "input": {"shape": list(pos.shape), "data": flat(pos)},
        "to_16": {"image_size": 16, "grid": 16 // P, "shape": list(pos16.shape), "data": flat(pos16)},
        "to_8": {"image_size": 8, "grid": 8 // P, "shape": list(pos8.shape), "data": flat(pos8)},
        "pixel_values_16": {"shape": list(pixels16.shape), "data": flat(pixels16)},
        "logits_16": flat(logits16),
    },
}
grads = [t.grad for k, t in w.items() if k not in zero_grad_params()]
print("loss", out["loss"], "log", NUM_LABELS, math.log(NUM_LABELS))
print("PyTorch f32 gradient error", torch_f32, "logit error", torch_f32_logits)
print("logits", [round(v, 4) for v in out["logits"]], "logit std", logits.detach().std().item())
print("largest |grad| f64", max(g.abs().max().item() for g in grads),
      "smallest tensor max|grad|", min(g.abs().max().item() for g in grads),
      "largest |key bias grad| f64", max(w[k].grad.abs().max().item() for k in zero_grad_params()))
print("patch embedding conv vs unfold+matmul max diff", patch_diff)
print("bicubic F.interpolate vs scalar formula max diff", scalar_diff,
      "to_16 moves the grid by", (pos16[0, 1:].std() - pos[0, 1:].std()).item())
print("logits_16", [round(v, 4) for v in out["interpolated"]["logits_16"]])
print("parameters", sum(t.numel() for t in w.values()))
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "vit_tiny.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes")
