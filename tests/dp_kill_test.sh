#!/usr/bin/env bash
# A rank killed with SIGKILL mid-training: every other rank must exit non-zero with a clear
# message, and the job must end within 60 s.
# Usage: dp_kill_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
cleanup() { [ -n "${job:-}" ] && kill -9 "$job" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1

for i in $(seq 1 100); do printf 'line %d of the small corpus, with some words.\n%%\n' "$i" >> "$work/corpus.txt"; done
"$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null || { echo "preprocess failed"; exit 1; }
"$mpiexec" --allow-run-as-root --oversubscribe -np 3 "$bin" train configs/gpt2/tiny.yaml tokenization.tokenizer=byte \
  model.vocab_size=257 "data.data_prefix=$work/c_text_document" model.num_layers=1 model.hidden_size=32 \
  model.num_attention_heads=2 model.ffn_hidden_size=64 model.max_seq_length=32 data.seq_length=32 \
  train.train_iter=1000000 train.train_micro_batch_size=2 train.log_period=1 train.evaluation.enabled=false \
  train.checkpointer.period=0 "train.output_dir=$work/run" > "$work/out" 2> "$work/err" &
job=$!

# Wait for training to be under way (a few steps logged; up to 180 s: three sanitizer-built ranks
# start slowly on a loaded machine), then kill rank 1.
for _ in $(seq 1 1800); do
  [ "$(cat "$work/run/metrics.jsonl" 2> /dev/null | wc -l)" -ge 3 ] && break
  sleep 0.1
done
# Rank 1: the process of this run (its command line names the output dir) whose environment says
# so; looked for again for up to 30 s (the launcher's children, not its own process).
victim=""
for _ in $(seq 1 300); do
  for pid in $(pgrep -f "train.output_dir=$work/run"); do
    [ "$pid" = "$job" ] && continue
    if tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$pid; fi
  done
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -z "$victim" ]; then
  echo "FAIL: training did not start, or rank 1 not found ($(wc -l < "$work/run/metrics.jsonl" 2> /dev/null || echo 0)"\
       "steps logged; processes of the run: $(pgrep -f "train.output_dir=$work/run" | tr '\n' ' '))"
  cat "$work/err"; exit 1
fi
kill -9 "$victim"
start=$(date +%s)
while kill -0 "$job" 2> /dev/null && [ $(($(date +%s) - start)) -lt 60 ]; do sleep 0.2; done
if kill -0 "$job" 2> /dev/null; then
  echo "FAIL: the job still runs 60 s after rank 1 was killed"; exit 1
fi
wait "$job"
rc=$?
job=""
elapsed=$(($(date +%s) - start))
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: mpirun exited 0 after a rank was killed"; fail=1; }
for r in 0 2; do
  grep -q "^meshflow: error: \[rank $r/3\]" "$work/err" || { echo "FAIL: no error line from surviving rank $r"; fail=1; }
done
if [ "$fail" -ne 0 ]; then cat "$work/err"; exit 1; fi
echo "rank 1 killed: job ended in ${elapsed} s with exit $rc; survivors said:"
grep "^meshflow: error:" "$work/err"
