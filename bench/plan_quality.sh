#!/usr/bin/env bash
# How good the planner's ranking is, measured: `mpirun -np N meshflow profile` measures the
# machine, `meshflow plan --hardware <that profile>` ranks the feasible plans, and each plan (all of
# them, or the first --top and every k-th after, --stride k) trains --steps steps under mpirun; the
# mean step time of the steps after the second is the plan's measured time. Prints each plan's
# predicted and measured seconds, then the chosen plan's rank among the measured ones, its regret
# (its measured time over the best measured, less 1) and Kendall's tau between the predicted and
# the measured order.
# Usage: bash bench/plan_quality.sh [--ranks 8] [--model tiny|30m] [--top 10] [--stride 1] [--steps 6]
#   (a Release build in build/, the corpus data/fortunes_text_document.* as scripts/quickstart.sh
#   makes it; nothing else running: the times are the measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=8 model=tiny top=10 stride=1 steps=6
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --stride) stride=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp build/meshflow "$work/meshflow"
mf=$work/meshflow
keys=(train.global_batch_size=16 train.train_micro_batch_size=1 train.log_period=1 train.evaluation.enabled=false
      train.checkpointer.period=1000 train.dist.heartbeat=false)
[ "$model" = 30m ] && keys+=(model.num_layers=6 model.hidden_size=384 model.num_attention_heads=6 model.ffn_hidden_size=1536)
mpirun --oversubscribe -np "$ranks" "$mf" profile --output "$work/profile.json" < /dev/null | grep -v "^profile: GEMM"
"$mf" plan configs/gpt2/tiny.yaml "${keys[@]}" --nproc "$ranks" --hardware "$work/profile.json" --json > "$work/plans.jsonl"
python3 - "$work/plans.jsonl" "$top" "$stride" > "$work/runs.txt" <<'PY'
import json, sys
plans = [json.loads(l) for l in open(sys.argv[1])]
top, stride = int(sys.argv[2]), int(sys.argv[3])
for i, p in enumerate(plans):
    if i < top or (i - top) % stride == 0:
        print(f'{i + 1}\t{p["step_s"]}\t{p["layout"]}\t' + " ".join(f"{k}={v}" for k, v in p["keys"].items()))
PY
echo "$(wc -l < "$work/plans.jsonl") feasible plans; measuring $(wc -l < "$work/runs.txt")"
: > "$work/results.txt"
while IFS=$'\t' read -r rank predicted layout plan_keys; do
  rm -rf "$work/run"
  # shellcheck disable=SC2086
  if ! mpirun --oversubscribe -np "$ranks" "$mf" train configs/gpt2/tiny.yaml "${keys[@]}" $plan_keys \
      "train.train_iter=$steps" "train.output_dir=$work/run" < /dev/null > "$work/log" 2>&1; then
    echo "plan $rank ($layout): run failed: $(grep -m1 -i error "$work/log")"
    continue
  fi
  measured=$(grep -o '"step_time":[0-9.e+-]*' "$work/run/metrics.jsonl" | cut -d: -f2 | tail -n +3 |
             awk '{ s += $1; n++ } END { printf "%.4f", s / n }')
  printf "plan %4d | %-50s | predicted %8.4f s | measured %8.4f s\n" "$rank" "$layout" "$predicted" "$measured"
  echo "$rank $predicted $measured" >> "$work/results.txt"
done < "$work/runs.txt"
python3 - "$work/results.txt" <<'PY'
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
n = len(rows)
if n < 2:
    sys.exit("fewer than two plans measured")
best = min(r[2] for r in rows)
chosen = min(rows, key=lambda r: r[0])
order = sorted(rows, key=lambda r: r[2])
concordant = discordant = 0
for i in range(n):
    for j in range(i + 1, n):
        a = (rows[i][1] - rows[j][1]) * (rows[i][2] - rows[j][2])
        concordant += a > 0
        discordant += a < 0
tau = (concordant - discordant) / (n * (n - 1) / 2)
print(f"chosen plan (predicted first): measured {chosen[2]:.4f} s, rank {order.index(chosen) + 1} of {n} measured; "
      f"regret {100 * (chosen[2] / best - 1):.1f}% against the best measured ({best:.4f} s); Kendall tau {tau:.3f}")
PY
