#!/usr/bin/env bash
# Training throughput of two builds of meshflow in one run, interleaved round by round so that
# both see the same machine load: GPT-2 small (124M, micro-batch 4 x 256, f32, AdamW, clipping;
# bench/gpt2_train_bench.cpp) and the tiny GPT-2 of the quickstart trained by `meshflow train`
# (configs/gpt2/tiny.yaml on the fortunes corpus, the full trainer: data, loop, hooks). Prints
# each round's tokens/s and the ratio new / old of the means.
# Usage: bash bench/compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [rounds]
#   (each a Release build folder holding meshflow and bench/meshflow_gpt2_train_bench; the corpus
#   data/fortunes_text_document.* made as scripts/quickstart.sh makes it)
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
small() {  # build -> tokens/s (mean of steps 1..5)
  "$1/bench/meshflow_gpt2_train_bench" 12 768 12 256 4 6 | sed -n 's/^meshflow: \([0-9.]*\) tokens\/s.*/\1/p'
}
tiny() {  # build -> tokens/s (mean over steps 6..40 of metrics.jsonl)
  local out=$work/tiny_$RANDOM
  "$1/meshflow" train configs/gpt2/tiny.yaml train.train_iter=40 train.log_period=1 train.evaluation.enabled=false \
    train.checkpointer.period=0 "train.output_dir=$out" > /dev/null
  grep -o '"tokens_per_sec":[0-9.e+]*' "$out/metrics.jsonl" | cut -d: -f2 | tail -n +6 |
    awk '{ s += $1; n++ } END { printf "%.1f\n", s / n }'
}
declare -A sum
for bench in small tiny; do
  for ((r = 1; r <= rounds; r++)); do
    for side in old new; do
      dir=$old; [ "$side" = new ] && dir=$new
      v=$($bench "$dir")
      sum[$bench.$side]=$(awk -v a="${sum[$bench.$side]:-0}" -v b="$v" 'BEGIN { print a + b }')
      echo "$bench round $r $side: $v tokens/s"
    done
  done
  awk -v o="${sum[$bench.old]}" -v n="${sum[$bench.new]}" -v b="$bench" -v r="$rounds" \
    'BEGIN { printf "%s: old %.1f, new %.1f tokens/s (means of %d rounds), new/old %.3f\n", b, o / r, n / r, r, n / o }'
done
