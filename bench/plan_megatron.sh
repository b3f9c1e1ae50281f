#!/usr/bin/env bash
# The planner on paper against Megatron-LM's published scaling runs (Narayanan et al., SC'21,
# "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Table 1: GPT
# models of 1.7B to 1T parameters on 32 to 3072 A100 80GB GPUs, vocabulary 51200, sequence 2048,
# mixed precision). For every row, `meshflow plan --hardware a100-80gb` on the row's GPUs and
# batch: the chosen (t, p) beside the published one, and the predicted throughput per GPU in the
# paper's own count (teraFLOP/s = 96 B s l h² (1 + s/6h + V/16lh) / (step seconds x GPUs), which
# counts the recomputed forward) beside the published figure — for the planner's first plan, and
# for its best plan in the paper's own setting: the published (t, p), every layer recomputed, no
# sequence parallelism, no ZeRO (the planner choosing the schedule and the micro-batch).
# Usage: bash bench/plan_megatron.sh   (a Release build in build/)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
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
printf "%-7s %5s %4s | %-9s %-9s | %9s %9s %6s | %9s %6s | %s\n" params GPUs B "paper t,p" "plan t,p" "paper TF" "plan TF" "diff" "setting TF" "diff" "plan"
while read -r size heads hidden layers t p gpus batch published; do
  ./build/meshflow plan configs/gpt2/base.yaml model.num_layers="$layers" model.hidden_size="$hidden" \
    model.num_attention_heads="$heads" model.ffn_hidden_size=0 model.max_seq_length=2048 model.vocab_size=51200 \
    data.seq_length=2048 train.global_batch_size="$batch" train.amp.enabled=true \
    --nproc "$gpus" --hardware a100-80gb --json > "$work/plans.jsonl" || true
  python3 - "$work/plans.jsonl" "$size" "$heads" "$hidden" "$layers" "$t" "$p" "$gpus" "$batch" "$published" <<'PY'
import json, sys
path, size, heads, h, l, t, p, n, B, published = sys.argv[1:]
h, l, t, p, n, B, published = int(h), int(l), int(t), int(p), int(n), int(B), float(published)
s, V = 2048, 51200
plans = [json.loads(x) for x in open(path)]
def tflops(plan):  # the paper's count per GPU
    F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    return F / (plan["step_s"] * n) / 1e12
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
same_tf = f"{tflops(same[0]):9.1f} {100 * (tflops(same[0]) / published - 1):+5.0f}%" if same else f"{'(none)':>9} {'':>6}"
print(f"{size:>7} {n:>5} {B:>4} | {f'{t},{p}':<9} {f'{bt},{bp}':<9} | {published:9.0f} {tflops(best):9.1f} {100 * (tflops(best) / published - 1):+5.0f}% | "
      f"{same_tf} | {best['layout']} | paper setting: {same[0]['layout'] if same else '-'}")
PY
done <<< "$rows"
