#!/usr/bin/env bash
# Mixed-precision convergence: the tiny GPT-2 of the README's main job (configs/gpt2/tiny.yaml:
# 4 layers, 128 hidden, GPT-2 BPE vocabulary, on the fortunes corpus) trained for 300 steps in
# f32 and with train.amp.enabled=true (bf16, and fp16 with dynamic loss scaling), same seed and
# data; prints each run's final validation loss and its relative difference to f32's. The
# target: bf16 within 2% of f32.
#   bash bench/amp_convergence.sh [extra overrides...]   # after building build/meshflow
# Micro batch 4 x 128 tokens keeps the three runs to a few minutes on 2 cores (OMP_NUM_THREADS=2).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MESHFLOW_BIN:-./build/meshflow}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ ! -f data/fortunes_text_document.idx ]; then
  mapfile -t corpus < <(bash scripts/prepare_corpus.sh)
  "$bin" preprocess --input "${corpus[@]}" --output-prefix data/fortunes \
    --vocab-file data/gpt2/encoder.json --merges-file data/gpt2/vocab.bpe --shuffle-seed 1 >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(configs/gpt2/tiny.yaml train.train_iter=300 train.train_micro_batch_size=4 train.log_period=50
        train.evaluation.eval_period=0 train.evaluation.eval_iter=20 train.checkpointer.period=0 "$@")
val_loss() { grep -o '"val_loss":[^,}]*' "$1/metrics.jsonl" | tail -1 | cut -d: -f2; }
declare -A loss secs
for mode in f32 bf16 fp16; do
  amp=(train.amp.enabled=false)
  [ "$mode" != f32 ] && amp=(train.amp.enabled=true "train.amp.dtype=$mode")
  start=$(date +%s)
  "$bin" train "${common[@]}" "${amp[@]}" "train.output_dir=$out/$mode" > "$out/$mode.log" 2>&1 ||
    { echo "$mode run failed:"; tail -20 "$out/$mode.log"; exit 1; }
  secs[$mode]=$(( $(date +%s) - start ))
  loss[$mode]=$(val_loss "$out/$mode")
  grep -o 'loss_scale [^|]*| skipped [0-9]*' "$out/$mode.log" | tail -1 | sed "s/^/$mode last log: /" || true
done
status=0
for mode in f32 bf16 fp16; do
  if [ "$mode" = f32 ]; then
    printf '%-5s final val loss %.4f  (%d s)\n' "$mode" "${loss[$mode]}" "${secs[$mode]}"
    continue
  fi
  rel=$(awk -v a="${loss[$mode]}" -v b="${loss[f32]}" 'BEGIN { d = (a - b) / b; printf "%+.2f%%", 100 * d }')
  printf '%-5s final val loss %.4f  (%d s)  relative to f32: %s\n' "$mode" "${loss[$mode]}" "${secs[$mode]}" "$rel"
  if [ "$mode" = bf16 ] && ! awk -v a="${loss[bf16]}" -v b="${loss[f32]}" 'BEGIN { d = (a - b) / b; exit !(d < 0.02 && d > -0.02) }'; then
    echo "bf16 is not within 2% of f32"; status=1
  fi
done
exit $status
