#!/usr/bin/python3
"""Writes tests/golden/generate_tiny.json: greedy text generation with a key/value cache by three
tiny causal language models (scripts/torch_decoder.py: plain PyTorch from Hugging Face's
GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM and generate() conventions), in f64 from random
weights that are multiples of 2^-8 (exact in f32: matrices and embeddings N(0, 0.3), biases
N(0, 0.1), norm weights 1 + N(0, 0.1), rounded), large enough for varied continuations:
  gpt2   vocab 97, 48 positions, hidden 32, 2 layers, 4 heads
  llama  vocab 97, hidden 32, 2 layers, 4 heads over 2 key/value heads, SwiGLU 48, rope_theta 1e4,
         untied output projection
  qwen2  the same sizes, 4 heads over 1 key/value head, q/k/v biases, tied output projection,
         rope_theta 1e6, rms_norm_eps 1e-6
Per case: three prompts (5, 9 and 2 tokens) continued by 12 greedy tokens each, alone
("greedy_single") and as one left-padded batch with pad id 0 ("greedy_batch"; positions counted
from each row's first real token, as Hugging Face's generate does); the logits (T, V) of prompt 0
and its 12 tokens in one forward without a cache ("logits"); "min_margin", the smallest gap between
the largest and the second largest logit over every greedy step of both runs. Each case's seed is
the first from 1 up whose greedy steps all have a margin above 1e-3 (so an f32 implementation must
choose the same tokens) and whose continuations have at least 5 distinct tokens each.
Beam search (torch_decoder.beam_search: transformers' _beam_search, BeamSearchScorer and
BeamHypotheses; do_sample=False, num_return_sequences=1, early_stopping=False; scores in f64) of the
same prompts, 3 beams, up to 12 new tokens, one eos token E, under "beam" (length_penalty 1.0) and
"beam_lp2" (length_penalty 2.0): {"num_beams", "length_penalty", "eos_token_id": E,
"max_new_tokens", "single" (each prompt alone), "batch" (the left-padded batch), the best
hypothesis' new tokens (E appended when it ended at E, as finalize() does), "finish_single",
"finish_batch" ("stop": ended at E, "length": at max_new_tokens), "scores" (the best hypotheses'
scores, single), "min_gap" (the smallest gap between consecutive candidates among the kept top
2 * num_beams of a step and between the last kept one and the next, over every step of both runs of
rows still running), "min_hyp_gap" (the smallest gap of the hypotheses' comparisons: a new eos
hypothesis against the worst once num_beams are kept, is_done()'s worst against the best attainable score, the
best against the second best at the end)}. E is the first token, in the order of first appearance
in the greedy continuations (prompt 0's, then 1's, then 2's), for which the length_penalty 1.0 beams
of the prompts alone end at least once at E and at least once at max_new_tokens, and both settings'
gaps are above 1e-5.
Checks before writing: the logits through the cache (prefill, then one token at a time) equal those
without it to 1e-10, the batch continues every prompt as it is continued alone (greedy and beam
search), and beam search with one beam is greedy (cut after E where E comes).
Run with Debian's python3-torch: /usr/bin/python3 scripts/make_generate_golden.py [--hf-dir DIR]
(--hf-dir: also each case's weights as a Hugging Face folder DIR/<case>/{config.json,
model.safetensors}, f32, readable by model.pretrained=DIR/<case>)."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_decoder as td  # noqa: E402

V, C, L, H, FF, P = 97, 32, 2, 4, 48, 48
PROMPT_LENGTHS = (5, 9, 2)
MAX_NEW = 12
PAD = 0
MIN_MARGIN = 1e-3
MIN_DISTINCT = 5  # of the 12 new tokens of every prompt
NUM_BEAMS = 3
BEAM_SETTINGS = (("beam", 1.0), ("beam_lp2", 2.0))
MIN_BEAM_GAP = 1e-5
CASES = {
    "gpt2": {"name": "gpt2", "vocab_size": V, "max_seq_length": P, "hidden_size": C, "num_layers": L,
             "num_attention_heads": H},
    "llama": {"name": "llama", "vocab_size": V, "hidden_size": C, "num_layers": L, "num_attention_heads": H,
              "num_key_value_heads": 2, "ffn_hidden_size": FF, "max_seq_length": P, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "llama3": None, "tie_word_embeddings": False, "qkv_bias": False,
              "sliding_window": 0},
    "qwen2": {"name": "qwen2", "vocab_size": V, "hidden_size": C, "num_layers": L, "num_attention_heads": H,
              "num_key_value_heads": 1, "ffn_hidden_size": FF, "max_seq_length": P, "rms_norm_eps": 1e-6,
              "rope_theta": 1.0e6, "llama3": None, "tie_word_embeddings": True, "qkv_bias": True,
              "sliding_window": 0},
}


def make_weights(config, gen):
    def param(*shape, std=0.3):
        return torch.round(torch.randn(*shape, dtype=torch.float64, generator=gen) * std * 256) / 256

    def norm():
        return 1 + param(C, std=0.1)

    if config["name"] == "gpt2":
        w = {"transformer.wte.weight": param(V, C, std=0.3), "transformer.wpe.weight": param(P, C)}
        for i in range(L):
            p = f"transformer.h.{i}."
            w[p + "ln_1.weight"], w[p + "ln_1.bias"] = norm(), param(C, std=0.1)
            w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = param(C, 3 * C), param(3 * C, std=0.1)
            w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = param(C, C), param(C, std=0.1)
            w[p + "ln_2.weight"], w[p + "ln_2.bias"] = norm(), param(C, std=0.1)
            w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = param(C, 4 * C), param(4 * C, std=0.1)
            w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = param(4 * C, C), param(C, std=0.1)
        w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = norm(), param(C, std=0.1)
        return w
    D = C // H
    KV = config["num_key_value_heads"] * D
    w = {"model.embed_tokens.weight": param(V, C, std=0.3)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm()
        for proj, rows in (("q_proj", H * D), ("k_proj", KV), ("v_proj", KV)):
            w[p + f"self_attn.{proj}.weight"] = param(rows, C)
            if config["qkv_bias"]:
                w[p + f"self_attn.{proj}.bias"] = param(rows, std=0.1)
        w[p + "self_attn.o_proj.weight"] = param(C, H * D)
        w[p + "post_attention_layernorm.weight"] = norm()
        w[p + "mlp.gate_proj.weight"] = param(FF, C)
        w[p + "mlp.up_proj.weight"] = param(FF, C)
        w[p + "mlp.down_proj.weight"] = param(C, FF)
    w["model.norm.weight"] = norm()
    if not config["tie_word_embeddings"]:
        w["lm_head.weight"] = param(V, C, std=0.3)
    return w


def run_case(config, seed):
    """Everything of one case for one seed; the reason it is rejected, or None."""
    gen = torch.Generator().manual_seed(seed)
    w = make_weights(config, gen)
    prompts = [torch.randint(1, V, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]
    model = td.build_model(config, w)
    margins = []
    single = [td.greedy_generate(model, [p], MAX_NEW, PAD, margins)[0] for p in prompts]
    batch = td.greedy_generate(model, prompts, MAX_NEW, PAD, margins)
    min_margin = min(m.min().item() for m in margins)
    r = {"seed": seed, "weights": w, "prompts": prompts, "single": single, "batch": batch, "min_margin": min_margin,
         "model": model}
    if min_margin <= MIN_MARGIN:
        return r, f"min_margin {min_margin:.3g}"
    if batch != single:  # every margin is clear: only a bug makes these differ
        sys.exit(f"make_generate_golden: FAILED: {config['name']} seed {seed}: greedy_batch {batch} != greedy_single {single}")
    if any(len(set(s)) < MIN_DISTINCT for s in single):
        return r, f"a continuation with fewer than {MIN_DISTINCT} distinct tokens"
    return r, None


def check(r):
    model = r["model"]
    worst = 0.0
    for p, s in zip(r["prompts"], r["single"]):
        seq = p + s
        full = td.full_logits(model, seq)
        cached = td.cached_logits(model, seq, len(p))
        worst = max(worst, (full - cached).abs().max().item())
    # The left-padded batch through the cache: its real positions against each row alone.
    ids, mask = td.left_pad([p + s for p, s in zip(r["prompts"], r["single"])], PAD)
    T0 = max(len(p) for p in r["prompts"])
    cache = model.new_cache()
    pos = td.positions_from_mask(mask)
    parts = [model(ids[:, :T0], pos[:, :T0], mask[:, :T0], cache)]
    for t in range(T0, ids.shape[1]):
        parts.append(model(ids[:, t:t + 1], pos[:, t:t + 1], mask[:, :t + 1], cache))
    batch_logits = torch.cat(parts, dim=1)
    for b, (p, s) in enumerate(zip(r["prompts"], r["single"])):
        n = len(p) + len(s)
        alone = td.full_logits(model, p + s)
        worst = max(worst, (batch_logits[b, -n:] - alone).abs().max().item())
    if worst > 1e-10:
        sys.exit(f"make_generate_golden: FAILED: logits through the cache differ from those without it by {worst:.3g}")
    return worst


def sig14(x):
    return float(f"{x:.14g}")


def beam_setting(r, eos, length_penalty):
    """One beam-search record of case r with eos token `eos`."""
    model, prompts = r["model"], r["prompts"]
    gaps, hyp_gaps = [], []
    single = [td.beam_search(model, [p], MAX_NEW, NUM_BEAMS, [eos], length_penalty, PAD, gaps, hyp_gaps)[0]
              for p in prompts]
    batch = td.beam_search(model, prompts, MAX_NEW, NUM_BEAMS, [eos], length_penalty, PAD, gaps, hyp_gaps)
    for b, (s, t) in enumerate(zip(single, batch)):
        if s["tokens"] != t["tokens"] or s["finish"] != t["finish"] or abs(s["score"] - t["score"]) > 1e-10:
            sys.exit(f"make_generate_golden: FAILED: beam search (eos {eos}, length_penalty {length_penalty}) of "
                     f"prompt {b}: batch {t} != single {s}")
    return {"num_beams": NUM_BEAMS, "length_penalty": length_penalty, "eos_token_id": eos, "max_new_tokens": MAX_NEW,
            "single": [s["tokens"] for s in single], "batch": [t["tokens"] for t in batch],
            "finish_single": [s["finish"] for s in single], "finish_batch": [t["finish"] for t in batch],
            "scores": [sig14(s["score"]) for s in single], "min_gap": sig14(min(gaps)),
            "min_hyp_gap": sig14(min(hyp_gaps))}


def beam_records(r):
    """{"beam": ..., "beam_lp2": ...} of case r, with its eos token chosen as the docstring says."""
    model, prompts = r["model"], r["prompts"]
    order = []
    for s in r["single"]:
        order += [t for t in s if t not in order]
    for eos in order:
        # One beam is greedy, cut after the first eos.
        for p, g in zip(prompts, r["single"]):
            cut = g[:g.index(eos) + 1] if eos in g else g
            for eos_ids in ([], [eos]):
                one = td.beam_search(model, [p], MAX_NEW, 1, eos_ids, 1.0, PAD)[0]
                want = g if not eos_ids else cut
                assert one["tokens"] == want, f"one beam {one['tokens']} != greedy {want} (eos {eos_ids})"
        recs = {key: beam_setting(r, eos, lp) for key, lp in BEAM_SETTINGS}
        finish = recs["beam"]["finish_single"]
        gap = min(min(x["min_gap"], x["min_hyp_gap"]) for x in recs.values())
        if "stop" in finish and "length" in finish and gap > MIN_BEAM_GAP:
            return recs
        print(f"  eos {eos} rejected: beam finishes {finish}, smallest gap {gap:.3g}")
    sys.exit(f"make_generate_golden: FAILED: no eos token for {r['model'].config['name']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hf-dir", help="also write each case as a Hugging Face folder DIR/<case>")
    ap.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                                      "golden", "generate_tiny.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # the same summation order on every machine
    cases = []
    for name, config in CASES.items():
        for seed in range(1, 1000):
            r, why = run_case(config, seed)
            if why is None:
                break
            print(f"{name}: seed {seed} rejected: {why}")
        else:
            sys.exit(f"make_generate_golden: FAILED: no seed for {name}")
        worst = check(r)
        logits = td.full_logits(r["model"], r["prompts"][0] + r["single"][0])
        print(f"{name}: seed {r['seed']}, min_margin {r['min_margin']:.6g}, cache vs no cache {worst:.3g}")
        for p, s in zip(r["prompts"], r["single"]):
            print(f"  {p} -> {s}")
        beams = beam_records(r)
        for key, x in beams.items():
            print(f"  {key}: eos {x['eos_token_id']}, length_penalty {x['length_penalty']}, "
                  f"min_gap {x['min_gap']:.6g}, min_hyp_gap {x['min_hyp_gap']:.6g}")
            for p, t, f, sc in zip(r["prompts"], x["single"], x["finish_single"], x["scores"]):
                print(f"    {p} -> {t} ({f}, score {sc:.6g})")
        if args.hf_dir:
            folder = os.path.join(args.hf_dir, name)
            td.save_hf(folder, config, r["weights"])
            back_config, back = td.load_hf(folder, torch.float64)
            assert set(back) == set(r["weights"]) and all(torch.equal(back[k], r["weights"][k]) for k in back)
            assert td.full_logits(td.build_model(back_config, back), r["prompts"][0] + r["single"][0]).equal(logits)
            print(f"  wrote {folder}")
        cases.append({
            "name": name,
            "seed": r["seed"],
            "config": config,
            "weights": {k: {"shape": list(t.shape), "data": t.flatten().tolist()} for k, t in r["weights"].items()},
            "pad_id": PAD,
            "prompts": r["prompts"],
            "max_new_tokens": MAX_NEW,
            "greedy_single": r["single"],
            "greedy_batch": r["batch"],
            "logits": [[sig14(x) for x in row] for row in logits.tolist()],
            "min_margin": sig14(r["min_margin"]),
            **beams,
        })
    with open(args.output, "w") as f:
        json.dump({"cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", os.path.normpath(args.output), f"({os.path.getsize(args.output)} bytes)")


if __name__ == "__main__":
    main()
