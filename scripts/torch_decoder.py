"""Plain-PyTorch causal language models with an explicit key/value cache, and greedy generation,
written from Hugging Face's conventions (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM,
MistralForCausalLM and generate()), as an independent reference for meshflow's decoding engine
(tests/golden/generate_tiny.json, bench/generate_torch.py). Debian's python3-torch is enough:
  /usr/bin/python3 -c "import sys; sys.path.insert(0, 'scripts'); import torch_decoder"

Models take a config with meshflow's model.* key names and weights under Hugging Face's parameter
names (GPT-2: transformer.wte.weight, transformer.h.0.attn.c_attn.weight (C, 3C) Conv1D layout, ...;
Llama family: model.embed_tokens.weight, model.layers.0.self_attn.q_proj.weight (out, in), ...,
lm_head.weight when untied), and compute in the weights' dtype.

  model(ids (B, T), position_ids (B, T), attention_mask (B, past + T), cache) -> logits (B, T, V)

appends the T new keys/values of every layer to `cache` (a KVCache, past = cache.length()). The
attention mask has 1 for real tokens, 0 for padding; a query at cache index past + i sees the keys
at cache indices <= past + i whose mask is 1 (causal masking bottom-right aligned). A query row
that sees no key at all (a left pad of the prompt) gets a zero attention output instead of NaN;
its logits are meaningless and never used.

greedy_generate() is generate(do_sample=False) for a batch: left padding, position_ids =
cumsum(attention_mask) - 1 with the pads' set to 1 (prepare_inputs_for_generation), one prefill,
then one token per row per step, argmax with the lowest id on ties.

beam_search() is generate(num_beams=N, do_sample=False, num_return_sequences=1, early_stopping=
False) as recent transformers' _beam_search with BeamSearchScorer and BeamHypotheses compute it (the
scores in f64; on exactly equal candidate scores the lower flat index, beam-major then token id).

load_hf()/save_hf() read and write a Hugging Face folder (config.json + model.safetensors, or
shards listed by model.safetensors.index.json), the safetensors format parsed by hand (8-byte
little-endian header length, JSON header {name: {dtype, shape, data_offsets}}, raw little-endian
data) since Debian has no safetensors package."""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

LLAMA_FAMILY = ("llama", "qwen2", "mistral")


class KVCache:
    """Per layer, the keys and values of every position read so far: (B, heads, S, D) each (the
    Llama family caches its key/value heads once, before repeating them for the query heads).
    Appending concatenates along S, as Hugging Face's DynamicCache does."""

    def __init__(self, num_layers):
        self.keys = [None] * num_layers
        self.values = [None] * num_layers

    def length(self):
        return 0 if self.keys[0] is None else self.keys[0].shape[2]

    def append(self, layer, k, v):
        if self.keys[layer] is None:
            self.keys[layer], self.values[layer] = k, v
        else:
            self.keys[layer] = torch.cat((self.keys[layer], k), dim=2)
            self.values[layer] = torch.cat((self.values[layer], v), dim=2)
        return self.keys[layer], self.values[layer]

    def reorder(self, rows):
        """Keeps the batch rows `rows` (a (B,) index tensor, repeats allowed), in that order: beam
        search's reorder_cache (index_select on the batch axis)."""
        self.keys = [None if k is None else k.index_select(0, rows) for k in self.keys]
        self.values = [None if v is None else v.index_select(0, rows) for v in self.values]


def allowed_keys(attention_mask, past, T, window=0):
    """(B, 1, T, past + T) bool: query i (cache index past + i) may see key j. window > 0: only
    the `window` latest cache indices, itself included (Mistral's sliding window, counted in
    cache indices as Hugging Face counts it)."""
    S = past + T
    q = torch.arange(past, S).view(T, 1)
    k = torch.arange(S).view(1, S)
    allowed = k <= q
    if window > 0:
        allowed = allowed & (k > q - window)
    allowed = allowed.unsqueeze(0) & attention_mask.to(torch.bool)[:, None, :]
    return allowed.unsqueeze(1)


def attend(q, k, v, allowed):
    """softmax(q k^T / sqrt(D)) v over the allowed keys; rows with no allowed key give 0."""
    scores = (q @ k.transpose(-2, -1)).div_(math.sqrt(q.shape[-1]))
    att = scores.masked_fill_(~allowed, float("-inf")).softmax(-1)
    seen = allowed.any(-1, keepdim=True)
    if not bool(seen.all()):
        att = torch.where(seen, att, torch.zeros((), dtype=att.dtype))
    return att @ v


def _defaults(ids, position_ids, attention_mask, cache):
    B, T = ids.shape
    past = cache.length() if cache is not None else 0
    if position_ids is None:
        position_ids = torch.arange(past, past + T).expand(B, T)
    if attention_mask is None:
        attention_mask = torch.ones(B, past + T, dtype=torch.long)
    assert attention_mask.shape == (B, past + T), f"attention_mask {tuple(attention_mask.shape)}, expected {(B, past + T)}"
    return past, position_ids, attention_mask


def gelu_tanh(x):
    """Hugging Face's gelu_new: GELU with the tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2:
    """GPT2LMHeadModel, dropout off: learned positions, pre-LayerNorm blocks, Conv1D (in, out)
    weights, tanh GELU, the head tied to the token embedding."""

    def __init__(self, config, weights):
        self.config = config
        self.w = weights
        self.V = config["vocab_size"]
        self.C = config["hidden_size"]
        self.L = config["num_layers"]
        self.H = config["num_attention_heads"]
        self.D = self.C // self.H
        self.P = config["max_seq_length"]
        self.eps = config.get("layernorm_epsilon", 1e-5)
        self.dtype = weights["transformer.wte.weight"].dtype

    def new_cache(self):
        return KVCache(self.L)

    def __call__(self, ids, position_ids=None, attention_mask=None, cache=None, last_only=False):
        return self.forward(ids, position_ids, attention_mask, cache, last_only)

    def forward(self, ids, position_ids=None, attention_mask=None, cache=None, last_only=False):
        w, C, H, D, eps = self.w, self.C, self.H, self.D, self.eps
        B, T = ids.shape
        past, position_ids, attention_mask = _defaults(ids, position_ids, attention_mask, cache)
        assert int(position_ids.max()) < self.P, "position beyond max_seq_length"
        allowed = allowed_keys(attention_mask, past, T)
        x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][position_ids]
        for i in range(self.L):
            p = f"transformer.h.{i}."
            h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
            qkv = torch.addmm(w[p + "attn.c_attn.bias"], h.reshape(B * T, C), w[p + "attn.c_attn.weight"])
            q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in qkv.view(B, T, 3 * C).split(C, dim=2))
            if cache is not None:
                k, v = cache.append(i, k, v)
            y = attend(q, k, v, allowed).transpose(1, 2).reshape(B * T, C)
            x = x + torch.addmm(w[p + "attn.c_proj.bias"], y, w[p + "attn.c_proj.weight"]).view(B, T, C)
            h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
            h = gelu_tanh(torch.addmm(w[p + "mlp.c_fc.bias"], h.reshape(B * T, C), w[p + "mlp.c_fc.weight"]))
            x = x + torch.addmm(w[p + "mlp.c_proj.bias"], h, w[p + "mlp.c_proj.weight"]).view(B, T, C)
        if last_only:
            x = x[:, -1:]
        x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
        return x @ w["transformer.wte.weight"].t()


def llama3_inv_freq(inv_freq, s):
    """Llama 3.1's rope scaling: long wavelengths slowed by `factor`, short ones kept, the band
    between blended (transformers' _compute_llama3_parameters)."""
    context = s["original_max_position_embeddings"]
    low, high = s["low_freq_factor"], s["high_freq_factor"]
    low_wavelen, high_wavelen = context / low, context / high
    out = []
    for f in inv_freq.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(f)
        elif wavelen > low_wavelen:
            out.append(f / s["factor"])
        else:
            smooth = (context / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / s["factor"] + smooth * f)
    return torch.tensor(out, dtype=torch.float64)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Llama:
    """LlamaForCausalLM and its relatives: RMSNorm, rotate-half rotary embeddings at the
    position_ids, grouped-query attention (key/value heads repeated for their query heads),
    silu(gate) * up, no dropout. qwen2: biases on q, k, v. mistral: a sliding window."""

    def __init__(self, config, weights):
        self.config = config
        self.w = weights
        self.V = config["vocab_size"]
        self.C = config["hidden_size"]
        self.L = config["num_layers"]
        self.H = config["num_attention_heads"]
        self.KVH = config.get("num_key_value_heads") or self.H
        self.D = config.get("head_dim") or self.C // self.H
        self.P = config["max_seq_length"]
        self.eps = config["rms_norm_eps"] if "rms_norm_eps" in config else config["layernorm_epsilon"]
        self.window = config.get("sliding_window") or 0
        self.tie = config.get("tie_word_embeddings", False)
        self.qkv_bias = config.get("qkv_bias", False)
        self.dtype = weights["model.embed_tokens.weight"].dtype
        inv_freq = 1.0 / (config["rope_theta"] ** (torch.arange(0, self.D, 2, dtype=torch.float64) / self.D))
        if config.get("llama3"):
            inv_freq = llama3_inv_freq(inv_freq, config["llama3"])
        self.inv_freq = inv_freq

    def new_cache(self):
        return KVCache(self.L)

    def __call__(self, ids, position_ids=None, attention_mask=None, cache=None, last_only=False):
        return self.forward(ids, position_ids, attention_mask, cache, last_only)

    def rms_norm(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def forward(self, ids, position_ids=None, attention_mask=None, cache=None, last_only=False):
        w, H, KVH, D = self.w, self.H, self.KVH, self.D
        B, T = ids.shape
        past, position_ids, attention_mask = _defaults(ids, position_ids, attention_mask, cache)
        allowed = allowed_keys(attention_mask, past, T, self.window)
        # The angles in f64, then cos/sin in the model's dtype (Hugging Face: in f32).
        freqs = position_ids.to(torch.float64)[..., None] * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(self.dtype)[:, None], emb.sin().to(self.dtype)[:, None]  # (B, 1, T, D)
        x = w["model.embed_tokens.weight"][ids]
        for i in range(self.L):
            p = f"model.layers.{i}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])

            def proj(name, heads):
                y = F.linear(h, w[p + f"self_attn.{name}.weight"], w.get(p + f"self_attn.{name}.bias") if self.qkv_bias else None)
                return y.view(B, T, heads, D).transpose(1, 2)

            q, k, v = proj("q_proj", H), proj("k_proj", KVH), proj("v_proj", KVH)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if cache is not None:
                k, v = cache.append(i, k, v)
            if KVH != H:  # repeat_kv
                k, v = k.repeat_interleave(H // KVH, dim=1), v.repeat_interleave(H // KVH, dim=1)
            y = attend(q, k, v, allowed).transpose(1, 2).reshape(B, T, H * D)
            x = x + F.linear(y, w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            m = F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + F.linear(m, w[p + "mlp.down_proj.weight"])
        if last_only:
            x = x[:, -1:]
        x = self.rms_norm(x, w["model.norm.weight"])
        return F.linear(x, w["model.embed_tokens.weight"] if self.tie else w["lm_head.weight"])


def build_model(config, weights):
    """GPT2 or Llama from a config (meshflow's model.* names) and weights (Hugging Face's names)."""
    name = config.get("name") or ("gpt2" if "transformer.wte.weight" in weights else "llama")
    if name == "gpt2":
        return GPT2(config, weights)
    assert name in LLAMA_FAMILY, f"unknown model name {name!r}"
    return Llama(config, weights)


# --- generation -----------------------------------------------------------------------------


def argmax_lowest(logits):
    """(B, V) -> (B,) the largest logit's id, the lowest id among equal largest ones."""
    top = logits.max(dim=-1, keepdim=True).values
    ids = torch.arange(logits.shape[-1]).expand_as(logits)
    return torch.where(logits == top, ids, logits.shape[-1]).min(dim=-1).values


def top2_margin(logits):
    """(B, V) -> (B,) the gap between the largest and the second largest logit (0 on a tie)."""
    t = logits.topk(2, dim=-1).values
    return t[:, 0] - t[:, 1]


def left_pad(prompts, pad_id=0):
    """prompts (lists of ids) -> ids (B, T), attention_mask (B, T): left padding to the longest."""
    T = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    mask = torch.zeros(len(prompts), T, dtype=torch.long)
    for b, p in enumerate(prompts):
        assert len(p) > 0, "empty prompt"
        ids[b, T - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[b, T - len(p):] = 1
    return ids, mask


def positions_from_mask(mask):
    """Hugging Face's prepare_inputs_for_generation: cumsum(mask) - 1, padding at position 1."""
    pos = mask.cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


@torch.no_grad()
def greedy_generate(model, prompts, max_new_tokens, pad_id=0, margins=None, step_logits=None):
    """generate(do_sample=False, max_new_tokens=N) of every prompt, as one left-padded batch with a
    cache: returns the new tokens of each prompt (lists of N ids; no stop tokens). margins: a list
    that gets each step's top1 - top2 gaps (B,); step_logits: a list that gets each step's (B, V)."""
    ids, mask = left_pad(prompts, pad_id)
    cache = model.new_cache()
    logits = model(ids, positions_from_mask(mask), mask, cache, last_only=True)[:, -1]
    out = []
    for step in range(max_new_tokens):
        if margins is not None:
            margins.append(top2_margin(logits))
        if step_logits is not None:
            step_logits.append(logits)
        nxt = argmax_lowest(logits)
        out.append(nxt)
        if step + 1 == max_new_tokens:
            break
        mask = torch.cat((mask, torch.ones(len(prompts), 1, dtype=mask.dtype)), dim=1)
        pos = positions_from_mask(mask)[:, -1:]
        logits = model(nxt[:, None], pos, mask, cache)[:, -1]
    return torch.stack(out, dim=1).tolist()


class BeamHypotheses:
    """The finished hypotheses of one batch row (transformers' BeamHypotheses, early_stopping=False):
    at most num_beams of them, (score, tokens, ended at eos), score = sum_logprobs / generated_len **
    length_penalty."""

    def __init__(self, num_beams, length_penalty, decoder_prompt_len):
        self.num_beams = num_beams
        self.length_penalty = length_penalty
        self.decoder_prompt_len = decoder_prompt_len
        self.beams = []
        self.worst_score = 1e9

    def __len__(self):
        return len(self.beams)

    def add(self, hyp, sum_logprobs, generated_len, eos, gaps=None):
        """Returns the entry appended, or None."""
        score = sum_logprobs / (generated_len ** self.length_penalty)
        if gaps is not None and len(self) >= self.num_beams:
            gaps.append(abs(score - self.worst_score))
        if len(self) < self.num_beams or score > self.worst_score:
            entry = (score, hyp, eos)
            self.beams.append(entry)
            if len(self) > self.num_beams:
                ranked = sorted((s, i) for i, (s, _, _) in enumerate(self.beams))
                del self.beams[ranked[0][1]]
                self.worst_score = ranked[1][0]
            else:
                self.worst_score = min(score, self.worst_score)
            return entry
        return None

    def is_done(self, best_sum_logprobs, cur_len, gaps=None, best_entry=None):
        """best_entry: the hypothesis added from the best candidate itself (an eos) at this step, if
        any; its score is highest_attainable by construction (the same expression), so the gap is
        taken against the other hypotheses."""
        if len(self) < self.num_beams:
            return False
        highest_attainable = best_sum_logprobs / (cur_len - self.decoder_prompt_len) ** self.length_penalty
        if gaps is not None:
            if any(e is best_entry for e in self.beams):
                others = [abs(e[0] - highest_attainable) for e in self.beams if e is not best_entry]
                if others:
                    gaps.append(min(others))
            else:
                gaps.append(abs(self.worst_score - highest_attainable))
        return self.worst_score >= highest_attainable


@torch.no_grad()
def beam_search(model, prompts, max_new_tokens, num_beams, eos_ids=(), length_penalty=1.0, pad_id=0, gaps=None,
                hyp_gaps=None):
    """generate(num_beams=num_beams, do_sample=False, num_return_sequences=1, early_stopping=False,
    length_penalty=length_penalty, eos_token_id=eos_ids, pad_token_id=pad_id, max_new_tokens=...) of
    every prompt, as one left-padded batch with a cache, each row repeated num_beams times (row b's
    beams are rows b * num_beams ...). Returns per prompt {"tokens": the best hypothesis' new tokens,
    with eos_ids[0] appended when it ended at an eos (as finalize() does), "finish": "stop" or
    "length", "score": its score}. gaps: a list that gets, per step and per row still running, the
    smallest gap between consecutive candidates among the kept ones and the next one (the top-k
    boundary); hyp_gaps: a list that gets the gaps of the hypotheses' comparisons (an eos hypothesis'
    add() against the worst score once full, is_done(), the best against the second best at the end; none for
    num_beams=1, where is_done() only compares a hypothesis with itself)."""
    eos_ids = list(eos_ids)
    B, nb = len(prompts), num_beams
    ids, mask = left_pad(prompts, pad_id)
    ids, mask = ids.repeat_interleave(nb, dim=0), mask.repeat_interleave(nb, dim=0)
    decoder_prompt_len = ids.shape[1]
    max_length = decoder_prompt_len + max_new_tokens
    hyps = [BeamHypotheses(nb, length_penalty, decoder_prompt_len) for _ in range(B)]
    done = [False] * B
    beam_scores = torch.zeros(B, nb, dtype=torch.float64)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view(B * nb)
    n_keep = max(2, 1 + len(eos_ids)) * nb
    cache = model.new_cache()
    logits = model(ids, positions_from_mask(mask), mask, cache, last_only=True)[:, -1]
    while True:
        V = logits.shape[-1]
        scores = F.log_softmax(logits.to(torch.float64), dim=-1) + beam_scores[:, None]
        scores = scores.view(B, nb * V)
        ranked, order = torch.sort(scores, dim=1, descending=True, stable=True)
        next_scores, flat = ranked[:, :n_keep], order[:, :n_keep]
        next_indices, next_tokens = flat // V, flat % V
        if gaps is not None:
            for b in range(B):
                if not done[b]:
                    gaps.append((ranked[b, :-1] - ranked[b, 1:])[:n_keep].min().item())
        # BeamSearchScorer.process()
        cur_len = ids.shape[1] + 1
        new_scores = torch.zeros(B, nb, dtype=torch.float64)
        new_tokens = torch.full((B, nb), pad_id, dtype=torch.long)
        new_rows = torch.zeros(B, nb, dtype=torch.long)
        for b in range(B):
            if done[b]:
                new_rows[b, :] = b * nb  # pads, score 0, from the row's beam 0: no longer used
                continue
            k, best_entry = 0, None
            for rank in range(n_keep):
                token, score = int(next_tokens[b, rank]), next_scores[b, rank].item()
                row = b * nb + int(next_indices[b, rank])
                if token in eos_ids:
                    if rank >= nb:
                        continue
                    entry = hyps[b].add(ids[row].tolist(), score, cur_len - decoder_prompt_len, True, hyp_gaps)
                    if rank == 0:
                        best_entry = entry
                else:
                    new_scores[b, k], new_tokens[b, k], new_rows[b, k] = score, token, row
                    k += 1
                if k == nb:
                    break
            assert k == nb, "fewer running beams than num_beams"
            done[b] = done[b] or hyps[b].is_done(next_scores[b].max().item(), cur_len, hyp_gaps, best_entry)
        beam_idx = new_rows.view(B * nb)
        ids = torch.cat((ids[beam_idx], new_tokens.view(B * nb, 1)), dim=1)
        beam_scores = new_scores.view(B * nb)
        if all(done) or ids.shape[1] >= max_length:
            break
        cache.reorder(beam_idx)
        mask = torch.cat((mask, torch.ones(B * nb, 1, dtype=mask.dtype)), dim=1)
        logits = model(ids[:, -1:], positions_from_mask(mask)[:, -1:], mask, cache)[:, -1]
    # BeamSearchScorer.finalize()
    out = []
    for b in range(B):
        if not done[b]:
            for i in range(nb):
                row = b * nb + i
                hyps[b].add(ids[row].tolist(), beam_scores[row].item(), ids.shape[1] - decoder_prompt_len, False)
        ranked = sorted(hyps[b].beams, key=lambda h: h[0])
        if hyp_gaps is not None and len(ranked) > 1:
            hyp_gaps.append(ranked[-1][0] - ranked[-2][0])
        score, seq, eos = ranked[-1]
        tokens = seq[decoder_prompt_len:] + ([eos_ids[0]] if eos else [])
        out.append({"tokens": tokens, "finish": "stop" if eos else "length", "score": score})
    return out


@torch.no_grad()
def full_logits(model, ids):
    """(T,) or (B, T) ids -> logits of every position in one forward without a cache."""
    ids = torch.as_tensor(ids, dtype=torch.long)
    squeeze = ids.dim() == 1
    if squeeze:
        ids = ids[None]
    logits = model(ids)
    return logits[0] if squeeze else logits


@torch.no_grad()
def cached_logits(model, ids, prefill):
    """The same logits through the cache: the first `prefill` positions at once, then one at a time."""
    ids = torch.as_tensor(ids, dtype=torch.long)
    squeeze = ids.dim() == 1
    if squeeze:
        ids = ids[None]
    cache = model.new_cache()
    parts = [model(ids[:, :prefill], cache=cache)]
    for t in range(prefill, ids.shape[1]):
        parts.append(model(ids[:, t:t + 1], cache=cache))
    logits = torch.cat(parts, dim=1)
    return logits[0] if squeeze else logits


# --- Hugging Face folders -------------------------------------------------------------------

_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
              "BOOL": np.bool_}


def read_safetensors(path):
    """{name: tensor} of a .safetensors file (BF16 widened to f32)."""
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = data[base + a:base + b]
        if e["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(_ST_DTYPES[e["dtype"]]).newbyteorder("<")).copy()
        out[name] = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="))).reshape(e["shape"])
    return out


def write_safetensors(path, tensors, dtype=torch.float32):
    """tensors {name: tensor} as `dtype` (F32 or F64), the data section aligned to 8 bytes."""
    st = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8")}[dtype]
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        blob = t.detach().to(dtype).contiguous().numpy().astype(st[1]).tobytes()
        header[name] = {"dtype": st[0], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for blob in blobs:
            f.write(blob)


def config_from_hf(hf):
    """A Hugging Face config.json (dict) -> meshflow's model.* keys."""
    t = hf.get("model_type", "gpt2" if "n_embd" in hf else "llama")
    if t == "gpt2":
        return {"name": "gpt2", "vocab_size": hf.get("vocab_size", 50257),
                "max_seq_length": hf.get("n_positions", hf.get("n_ctx", 1024)), "hidden_size": hf.get("n_embd", 768),
                "num_layers": hf.get("n_layer", 12), "num_attention_heads": hf.get("n_head", 12),
                "ffn_hidden_size": hf.get("n_inner") or 0, "layernorm_epsilon": hf.get("layer_norm_epsilon", 1e-5)}
    assert t in LLAMA_FAMILY, f"model_type {t!r} is not gpt2, llama, qwen2 or mistral"
    heads = hf.get("num_attention_heads", 32)
    scaling = hf.get("rope_scaling")
    llama3 = None
    if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
        llama3 = {k: scaling[k] for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}
    return {"name": t, "vocab_size": hf.get("vocab_size", 32000), "hidden_size": hf.get("hidden_size", 4096),
            "num_layers": hf.get("num_hidden_layers", 32), "num_attention_heads": heads,
            "num_key_value_heads": hf.get("num_key_value_heads") or heads, "head_dim": hf.get("head_dim") or 0,
            "ffn_hidden_size": hf.get("intermediate_size", 11008),
            "max_seq_length": hf.get("max_position_embeddings", 4096), "rms_norm_eps": hf.get("rms_norm_eps", 1e-6),
            "rope_theta": hf.get("rope_theta", 10000.0), "llama3": llama3,
            "tie_word_embeddings": hf.get("tie_word_embeddings", False), "qkv_bias": t == "qwen2",
            "sliding_window": (hf.get("sliding_window") or 0) if t == "mistral" else 0}


def config_to_hf(c):
    """meshflow's model.* keys -> a Hugging Face config.json (dict), f32 weights."""
    name = c.get("name", "gpt2")
    if name == "gpt2":
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c["vocab_size"],
                "n_positions": c["max_seq_length"], "n_ctx": c["max_seq_length"], "n_embd": c["hidden_size"],
                "n_layer": c["num_layers"], "n_head": c["num_attention_heads"], "n_inner": c.get("ffn_hidden_size") or None,
                "activation_function": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
                "layer_norm_epsilon": c.get("layernorm_epsilon", 1e-5), "initializer_range": 0.02,
                "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
                "tie_word_embeddings": True, "use_cache": True, "torch_dtype": "float32"}
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}[name]
    heads = c["num_attention_heads"]
    assert c.get("qkv_bias", False) == (name == "qwen2"), "q/k/v biases are Qwen2's alone in Hugging Face's classes"
    j = {"architectures": [arch], "model_type": name, "vocab_size": c["vocab_size"], "hidden_size": c["hidden_size"],
         "intermediate_size": c["ffn_hidden_size"], "num_hidden_layers": c["num_layers"],
         "num_attention_heads": heads, "num_key_value_heads": c.get("num_key_value_heads") or heads,
         "head_dim": c.get("head_dim") or c["hidden_size"] // heads, "hidden_act": "silu",
         "max_position_embeddings": c["max_seq_length"], "rms_norm_eps": c["rms_norm_eps"],
         "rope_theta": c["rope_theta"], "rope_scaling": None, "tie_word_embeddings": c.get("tie_word_embeddings", False),
         "attention_dropout": 0.0, "initializer_range": 0.02, "use_cache": True, "torch_dtype": "float32"}
    if c.get("llama3"):
        j["rope_scaling"] = dict(rope_type="llama3", **c["llama3"])
    if name == "llama":
        j["attention_bias"] = False
        j["mlp_bias"] = False
    if name == "qwen2":
        j["use_sliding_window"] = False
    if name == "mistral":
        j["sliding_window"] = c.get("sliding_window") or None
    return j


def load_hf(folder, dtype=torch.float32):
    """(config with meshflow's keys, {Hugging Face name: tensor in dtype}) of a Hugging Face folder."""
    with open(os.path.join(folder, "config.json")) as f:
        config = config_from_hf(json.load(f))
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for file in files:
        for name, t in read_safetensors(os.path.join(folder, file)).items():
            if config["name"] == "gpt2":
                if name == "lm_head.weight" or name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
                    continue  # the tied head, the causal-mask buffers
                if not name.startswith("transformer."):
                    name = "transformer." + name
            else:
                if name.endswith("rotary_emb.inv_freq") or (config["tie_word_embeddings"] and name == "lm_head.weight"):
                    continue
            weights[name] = t.to(dtype)
    return config, weights


def save_hf(folder, config, weights, dtype=torch.float32):
    """A Hugging Face folder: config.json and model.safetensors (`dtype`; tied heads not written)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config_to_hf(config), f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(folder, "model.safetensors"), weights, dtype)
