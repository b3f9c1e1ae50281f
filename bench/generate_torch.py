#!/usr/bin/python3
"""PyTorch side of the text-generation benchmark, llama-bench's figures: pp512 (one prefill of 512
prompt tokens per row, tokens/s = B * 512 / seconds, the best of --reps after a warm-up) and tg128
(128 single-token decode steps through the key/value cache after an 8-token prompt, greedy, tokens/s
= B * 128 / seconds, the best of --reps after a warm-up), f32 under torch.inference_mode(), with the
models of scripts/torch_decoder.py (Hugging Face's GPT2LMHeadModel / LlamaForCausalLM conventions,
the cache appended by concatenation as DynamicCache does). The prefill computes the last position's
logits only (what generation uses). One JSON line per (test, batch) on stdout:
  {"impl":"pytorch","model":"gpt2","test":"pp512","batch":1,"tokens_per_s":..,"seconds":..,"threads":2}
Sizes: --model gpt2 is GPT-2 small (124M: 12 layers, 768 hidden, 12 heads, 50257 tokens, 1024
positions); --model llama a 125M Llama (12 layers, 768 hidden, 12 heads over 4 key/value heads,
SwiGLU 2048, 32000 tokens, 2048 positions); --layers etc. change them; random weights from a fixed
seed, or --hf DIR a Hugging Face folder's (config.json + model.safetensors).
PyTorch runs at its best settings here, as scripts/bench_train.sh runs it: OMP_NUM_THREADS=--threads,
and on AVX-512 machines ATEN_CPU_CAPABILITY=avx512 and OPENBLAS_CORETYPE=SkylakeX (set before torch
loads unless already set).
Usage: /usr/bin/python3 bench/generate_torch.py [--model gpt2|llama] [--hf DIR] [--threads N]
       [--batch 1 8] [--quick (pp64, tg16: a smoke run)]"""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser(description="pp/tg tokens/s of PyTorch's greedy decoding with a cache")
ap.add_argument("--model", choices=("gpt2", "llama"), default="gpt2")
ap.add_argument("--hf", help="a Hugging Face folder (config.json + model.safetensors) instead of random weights")
ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count())
ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
ap.add_argument("--pp", type=int, default=512, help="prompt tokens per row of the prefill test")
ap.add_argument("--tg", type=int, default=128, help="decode steps of the generation test")
ap.add_argument("--prompt", type=int, default=8, help="the generation test's prompt (not timed)")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--quick", action="store_true", help="pp64 and tg16, 2 repetitions: a smoke run")
ap.add_argument("--tests", nargs="+", default=["pp", "tg"], choices=("pp", "tg"))
for key in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab", "max-seq"):
    ap.add_argument("--" + key, type=int)
args = ap.parse_args()
if args.quick:
    args.pp, args.tg, args.reps = 64, 16, 2

os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
try:
    with open("/proc/cpuinfo") as f:
        if " avx512f " in f.read():
            os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx512")
            os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
except OSError:
    pass

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import torch_decoder as td  # noqa: E402


def sizes():
    if args.model == "gpt2":
        c = {"name": "gpt2", "vocab_size": 50257, "max_seq_length": 1024, "hidden_size": 768, "num_layers": 12,
             "num_attention_heads": 12}
    else:
        c = {"name": "llama", "vocab_size": 32000, "hidden_size": 768, "num_layers": 12, "num_attention_heads": 12,
             "num_key_value_heads": 4, "ffn_hidden_size": 2048, "max_seq_length": 2048, "rms_norm_eps": 1e-5,
             "rope_theta": 10000.0, "llama3": None, "tie_word_embeddings": False, "qkv_bias": False,
             "sliding_window": 0}
    for key, name in (("layers", "num_layers"), ("hidden", "hidden_size"), ("heads", "num_attention_heads"),
                      ("kv_heads", "num_key_value_heads"), ("ffn", "ffn_hidden_size"), ("vocab", "vocab_size"),
                      ("max_seq", "max_seq_length")):
        if getattr(args, key) is not None:
            c[name] = getattr(args, key)
    return c


def random_weights(c):
    """GPT-2's / Llama's initialisation (N(0, 0.02) matrices, unit norms, zero biases), f32."""
    g = torch.Generator().manual_seed(0)

    def mat(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    C, L, V = c["hidden_size"], c["num_layers"], c["vocab_size"]
    if c["name"] == "gpt2":
        F_ = 4 * C
        w = {"transformer.wte.weight": mat(V, C), "transformer.wpe.weight": mat(c["max_seq_length"], C),
             "transformer.ln_f.weight": torch.ones(C), "transformer.ln_f.bias": torch.zeros(C)}
        for i in range(L):
            p = f"transformer.h.{i}."
            w.update({p + "ln_1.weight": torch.ones(C), p + "ln_1.bias": torch.zeros(C),
                      p + "attn.c_attn.weight": mat(C, 3 * C), p + "attn.c_attn.bias": torch.zeros(3 * C),
                      p + "attn.c_proj.weight": mat(C, C), p + "attn.c_proj.bias": torch.zeros(C),
                      p + "ln_2.weight": torch.ones(C), p + "ln_2.bias": torch.zeros(C),
                      p + "mlp.c_fc.weight": mat(C, F_), p + "mlp.c_fc.bias": torch.zeros(F_),
                      p + "mlp.c_proj.weight": mat(F_, C), p + "mlp.c_proj.bias": torch.zeros(C)})
        return w
    H, KVH, FF = c["num_attention_heads"], c["num_key_value_heads"], c["ffn_hidden_size"]
    D = C // H
    w = {"model.embed_tokens.weight": mat(V, C), "model.norm.weight": torch.ones(C), "lm_head.weight": mat(V, C)}
    for i in range(L):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": torch.ones(C), p + "post_attention_layernorm.weight": torch.ones(C),
                  p + "self_attn.q_proj.weight": mat(H * D, C), p + "self_attn.k_proj.weight": mat(KVH * D, C),
                  p + "self_attn.v_proj.weight": mat(KVH * D, C), p + "self_attn.o_proj.weight": mat(C, H * D),
                  p + "mlp.gate_proj.weight": mat(FF, C), p + "mlp.up_proj.weight": mat(FF, C),
                  p + "mlp.down_proj.weight": mat(C, FF)})
    return w


def prefill_seconds(model, B, T, gen):
    ids = torch.randint(0, model.V, (B, T), generator=gen)
    t0 = time.perf_counter()
    model(ids, cache=model.new_cache(), last_only=True)
    return time.perf_counter() - t0


def decode_seconds(model, B, steps, gen):
    cache = model.new_cache()
    logits = model(torch.randint(0, model.V, (B, args.prompt), generator=gen), cache=cache, last_only=True)[:, -1]
    t0 = time.perf_counter()
    for _ in range(steps):
        nxt = td.argmax_lowest(logits)
        logits = model(nxt[:, None], cache=cache)[:, -1]
    return time.perf_counter() - t0


def main():
    torch.set_num_threads(args.threads)
    if args.hf:
        config, weights = td.load_hf(args.hf, torch.float32)
    else:
        config = sizes()
        weights = random_weights(config)
    model = td.build_model(config, weights)
    name = config["name"]
    nparams = sum(t.numel() for t in weights.values())
    cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else os.environ.get(
        "ATEN_CPU_CAPABILITY", "?")
    print(f"pytorch {torch.__version__}: {name} {nparams / 1e6:.4g}M parameters ({args.hf or 'random weights'}), "
          f"{torch.get_num_threads()} threads, capability {cap}", file=sys.stderr, flush=True)
    if args.pp > model.P or args.prompt + args.tg > model.P:
        sys.exit(f"generate_torch.py: pp{args.pp} or a {args.prompt}-token prompt + tg{args.tg} exceeds the model's "
                 f"{model.P} positions")
    gen = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for test in args.tests:
            for B in args.batch:
                if test == "pp":
                    label, n = f"pp{args.pp}", args.pp
                    prefill_seconds(model, B, args.pp, gen)  # warm-up
                    secs = min(prefill_seconds(model, B, args.pp, gen) for _ in range(args.reps))
                else:
                    label, n = f"tg{args.tg}", args.tg
                    decode_seconds(model, B, min(args.tg, 8), gen)  # warm-up
                    secs = min(decode_seconds(model, B, args.tg, gen) for _ in range(args.reps))
                print(json.dumps({"impl": "pytorch", "model": name, "test": label, "batch": B,
                                  "tokens_per_s": round(B * n / secs, 2), "seconds": round(secs, 4),
                                  "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main()
