#!/usr/bin/env bash
# The planner's memory model against the allocator: for every feasible plan `meshflow plan
# --json` lists (or every k-th, --stride k), trains a step under `mpirun -np N` with the plan's
# keys and compares the predicted peak per rank with the largest peak any rank measured in its first step
# (metrics.jsonl: peak_bytes of every rank). Two models: the tiny GPT-2 of the quickstart (7.2M
# parameters) and a 30M GPT-2 (6 layers, hidden 384), global batch 8 x 128 tokens.
# Usage: bash bench/plan_memory.sh [--ranks "1 2 4 8"] [--stride K] [--models "tiny 30m"]
#   (a Release build in build/, the corpus data/fortunes_text_document.* as scripts/quickstart.sh makes it)
# Prints one line per plan (ranks, layout, predicted and measured GB, error) and per (model, ranks)
# the largest error and the share of plans within 10%.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="1 2 4 8" stride=1 models="tiny 30m"
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --stride) stride=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp build/meshflow "$work/meshflow"  # the binary measured stays the same while the tree is rebuilt
mf=$work/meshflow
common=(train.global_batch_size=8 train.train_micro_batch_size=1 train.train_iter=1 train.log_period=1
        train.evaluation.enabled=false train.checkpointer.period=1000 train.dist.heartbeat=false)
model_keys() {
  case $1 in
    tiny) echo "" ;;
    30m) echo "model.num_layers=6 model.hidden_size=384 model.num_attention_heads=6 model.ffn_hidden_size=1536" ;;
  esac
}
for model in $models; do
  for n in $ranks; do
    # shellcheck disable=SC2046
    "$mf" plan configs/gpt2/tiny.yaml "${common[@]}" $(model_keys "$model") --nproc "$n" --json \
      --memory-per-rank 1000 > "$work/plans.jsonl"
    python3 - "$work/plans.jsonl" "$stride" > "$work/runs.txt" <<'PY'
import json, sys
plans = [json.loads(l) for l in open(sys.argv[1])]
for i, p in enumerate(plans):
    if i % int(sys.argv[2]) == 0:
        keys = " ".join(f"{k}={v}" for k, v in p["keys"].items())
        print(f'{p["memory"]["peak"]}\t{p["layout"]}\t{keys}')
PY
    total=0 within=0 worst=0
    while IFS=$'\t' read -r predicted layout keys; do
      out=$work/run
      rm -rf "$out"
      # shellcheck disable=SC2086
      if ! mpirun --oversubscribe -np "$n" "$mf" train configs/gpt2/tiny.yaml "${common[@]}" \
          $(model_keys "$model") $keys "train.output_dir=$out" < /dev/null > "$work/log" 2>&1; then
        echo "$model $n | $layout | run failed: $(grep -m1 -i error "$work/log")"
        continue
      fi
      line=$(python3 - "$out/metrics.jsonl" "$predicted" <<'PY'
import json, sys
peak = 0
for l in open(sys.argv[1]):
    d = json.loads(l)
    peak = max([peak, d.get("peak_bytes", 0)] + [r.get("peak_bytes", 0) for r in d.get("ranks", [])])
pred = float(sys.argv[2])
print(f"{pred / 1e9:.4f} {peak / 1e9:.4f} {100 * (pred - peak) / peak:+.1f}")
PY
)
      read -r p m e <<< "$line"
      echo "$model $n | $layout | predicted $p GB | measured $m GB | $e%"
      total=$((total + 1))
      abs=${e#[-+]}
      if awk "BEGIN { exit !($abs <= 10) }"; then within=$((within + 1)); fi
      if awk "BEGIN { exit !($abs > $worst) }"; then worst=$abs; fi
    done < "$work/runs.txt"
    echo "== $model on $n ranks: $within of $total plans within 10%, largest error $worst%"
  done
done
