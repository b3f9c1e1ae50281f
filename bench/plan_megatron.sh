#!/usr/bin/env bash
# The planner on paper against Megatron-LM's published scaling runs (Narayanan et al., SC'21,
# "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Table 1: GPT
# models of 1.7B to 1T parameters on 32 to 3072 A100 80GB GPUs, vocabulary 51200, sequence 2048,
# mixed precision).
#
# The hardware is the published A100 profile; the runtime is the paper's, written into it:
# - its attention is unfused: a batched GEMM writes every score (heads x 2048 x 2048 per sequence,
#   the masked ones too) in half precision, a fused scale-mask-softmax reads and writes them,
#   dropout reads them and writes its output and a byte mask, the second batched GEMM reads them:
#   13 bytes per score through memory in forward; backward keeps the softmax's output, the mask
#   and dropout's output, 5 bytes per score (Korthikanti et al. 2022 count the same 5 a s^2 b);
# - its data-parallel all-reduce runs after backward, not overlapped with it (the local DDP).
#
# For every row, `meshflow plan` on the row's GPUs and batch: the chosen (t, p) beside the
# published one, and predicted teraFLOP/s per GPU beside the published figure, for the planner's
# first plan and for its best plan in the paper's own setting (the published (t, p), every layer
# recomputed, no sequence parallelism, no ZeRO; the planner choosing the schedule and the
# micro-batch). Two counts:
# - "TF": FLOPs executed per second — the paper's own, 96 B s l h^2 (1 + s/6h + V/16lh) per step
#   under full recomputation; in general (72 + 24 r/l) B s l h^2 (1 + s/6h) + 6 B s h V for r
#   layers recomputed fully, or 72 B s l h^2 (1 + s/6h) + 4 B s^2 h r + 6 B s h V selectively;
# - "speed": the plan's samples per second over the paper's (published TF x GPUs / its FLOPs per
#   step) — what recomputing less buys without adding FLOPs.
# Usage: bash bench/plan_megatron.sh   (a Release build in build/)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
./build/meshflow profile --published a100-80gb --output "$work/a100.json" > /dev/null
python3 - "$work/a100.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
h.update(name="a100-80gb, Megatron-LM 2021's runtime", attention_score_bytes=13, attention_score_kept_bytes=5, dp_overlap=0)
json.dump(h, open(sys.argv[1], "w"), indent=2)
PY
# params(B) heads hidden layers t p GPUs batch published-TFLOP/s-per-GPU
rows="1.7 24 2304 24 1 1 32 512 137
3.6 32 3072 30 2 1 64 512 138
7.5 32 4096 36 4 1 128 512 142
18.4 48 6144 40 8 1 256 1024 135
39.1 64 8192 48 8 2 512 1536 138
76.1 80 10240 60 8 4 1024 1792 140
145.6 96 12288 80 8 8 1536 2304 148
310.1 128 16384 96 8 16 1920 2160 155
529.6 128 20480 105 8 35 2520 2520 163
1008.0 160 25600 128 8 64 3072 3072 163"
printf "%-7s %5s %4s | %-9s %-9s | %9s | %8s %6s %6s | %8s %6s %6s | %s\n" params GPUs B "paper t,p" "plan t,p" "paper TF" \
  "plan TF" "diff" "speed" "same TF" "diff" "speed" "plan"
while read -r size heads hidden layers t p gpus batch published; do
  ./build/meshflow plan configs/gpt2/base.yaml model.num_layers="$layers" model.hidden_size="$hidden" \
    model.num_attention_heads="$heads" model.ffn_hidden_size=0 model.max_seq_length=2048 model.vocab_size=51200 \
    data.seq_length=2048 train.global_batch_size="$batch" train.amp.enabled=true \
    --nproc "$gpus" --hardware "$work/a100.json" --json > "$work/plans.jsonl" || true
  python3 - "$work/plans.jsonl" "$size" "$heads" "$hidden" "$layers" "$t" "$p" "$gpus" "$batch" "$published" <<'PY'
import json, sys
path, size, heads, h, l, t, p, n, B, published = sys.argv[1:]
h, l, t, p, n, B, published = int(h), int(l), int(t), int(p), int(n), int(B), float(published)
s, V = 2048, 51200
plans = [json.loads(x) for x in open(path)]
def executed(plan):  # FLOPs per step, the recomputed ones included
    k = plan["keys"]
    r = 0
    if k["train.activation_checkpoint.enabled"] == "true":
        end = int(k["train.activation_checkpoint.end_layer"])
        r = (l if end < 0 else end) - int(k["train.activation_checkpoint.start_layer"])
    full = k["train.activation_checkpoint.granularity"] == "full"
    layers = (72 + (24 * r / l if full else 0)) * B * s * l * h * h * (1 + s / (6 * h))
    return layers + (0 if full else 4 * B * s * s * h * r) + 6 * B * s * h * V
paper_flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
def tflops(plan):
    return executed(plan) / (plan["step_s"] * n) / 1e12
def speed(plan):  # samples per second over the paper's
    return paper_flops / (published * 1e12 * n) / plan["step_s"]
def tp_pp(plan):
    k = plan["keys"]
    return int(k["train.dist.tensor_parallel_size"]), int(k["train.dist.pipeline_parallel_size"])
if not plans:
    print(f"{size:>7} {n:>5} {B:>4} | {t},{p}       | no feasible plan"); sys.exit(0)
best = plans[0]
def paper_setting(x):
    k = x["keys"]
    return (tp_pp(x) == (t, p) and k["train.activation_checkpoint.enabled"] == "true"
            and k["train.activation_checkpoint.granularity"] == "full" and k["train.activation_checkpoint.end_layer"] == "-1"
            and k["train.dist.sequence_parallel"] == "false" and k["train.zero_optimization.enabled"] == "false")
same = [x for x in plans if paper_setting(x)]
bt, bp = tp_pp(best)
def cols(x):
    return f"{tflops(x):8.1f} {100 * (tflops(x) / published - 1):+5.0f}% {speed(x):5.2f}x"
same_cols = cols(same[0]) if same else f"{'(none)':>22}"
print(f"{size:>7} {n:>5} {B:>4} | {f'{t},{p}':<9} {f'{bt},{bp}':<9} | {published:9.0f} | {cols(best)} | {same_cols} | "
      f"{best['layout']} | paper setting: {same[0]['layout'] if same else '-'}")
PY
done <<< "$rows"
