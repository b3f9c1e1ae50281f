#!/usr/bin/env bash
# A straggler named: rank 1 of a 3-rank run is held back (stopped 95% of the time by this script,
# as a slow or shared machine would), so its compute time is well above the others'; the log and
# metrics.jsonl must name rank 1 as a straggler (train.straggler_factor=2) in at least half of the
# periods logged while it was held (a stop that lands in its wait for the others' gradients counts
# as waiting, not computing) and never another rank.
# Usage: straggler_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
job=""
cleanup() { [ -n "$job" ] && kill -9 "$job" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1
for i in $(seq 1 100); do printf 'line %d of the small corpus, with some words.\n%%\n' "$i" >> "$work/corpus.txt"; done
"$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null || { echo "preprocess failed"; exit 1; }
"$mpiexec" --allow-run-as-root --oversubscribe -np 3 "$bin" train configs/gpt2/tiny.yaml tokenization.tokenizer=byte \
  model.vocab_size=257 "data.data_prefix=$work/c_text_document" model.num_layers=2 model.hidden_size=32 \
  model.num_attention_heads=2 model.ffn_hidden_size=128 model.max_seq_length=128 data.seq_length=128 \
  train.train_iter=1000000 train.train_micro_batch_size=16 train.log_period=2 train.evaluation.enabled=false \
  train.checkpointer.period=0 train.straggler_factor=2 "train.output_dir=$work/run" > "$work/out" 2> "$work/err" &
job=$!
for _ in $(seq 1 3000); do
  [ "$(cat "$work/run/metrics.jsonl" 2> /dev/null | wc -l)" -ge 1 ] && break
  kill -0 "$job" 2> /dev/null || break
  sleep 0.1
done
victim=""
for pid in $(pgrep -f "train.output_dir=$work/run"); do
  [ "$(cat "/proc/$pid/comm" 2> /dev/null)" = meshflow ] || continue
  tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$pid
done
[ -n "$victim" ] || { echo "FAIL: training did not start"; cat "$work/err"; exit 1; }
lines0=$(wc -l < "$work/run/metrics.jsonl")
# Hold rank 1 back until 6 more steps are logged (at most 120 s).
end=$(($(date +%s) + 120))
kill -STOP "$victim"  # (the loop's own checks run while it is stopped)
while [ "$(wc -l < "$work/run/metrics.jsonl")" -lt $((lines0 + 6)) ] && [ "$(date +%s)" -lt "$end" ]; do
  sleep 0.19; kill -CONT "$victim"; sleep 0.01; kill -STOP "$victim"
done
lines1=$(wc -l < "$work/run/metrics.jsonl")  # (rank 1 still stopped: the rows logged while held)
kill -CONT "$victim"
kill -9 "$job" 2> /dev/null
wait "$job" 2> /dev/null
job=""
pkill -9 -f "train.output_dir=$work/run" 2> /dev/null
fail=0
python3 - "$work/run/metrics.jsonl" "$lines0" "$lines1" << 'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][int(sys.argv[2]) + 1:int(sys.argv[3])]  # the held-back steps
named = [r for r in rows if "stragglers" in r]
if 2 * len(named) < len(rows) or not rows:
    sys.exit(f"FAIL: only {len(named)} of {len(rows)} held-back logged steps name a straggler")
for r in named:
    ranks = [s["rank"] for s in r["stragglers"]]
    if ranks != [1]:
        sys.exit(f"FAIL: step {r['step']} names ranks {ranks}, not [1]")
    if not all("mean_compute_time" in x and "comm_wait_time" in x for x in r["ranks"]):
        sys.exit("FAIL: a rank's entry lacks mean_compute_time or comm_wait_time")
ratios = [r["stragglers"][0]["ratio"] for r in named]
print(f"rank 1 named in {len(named)} of {len(rows)} logged steps; its compute time "
      f"{min(ratios):.1f}x to {max(ratios):.1f}x the median rank's")
PY
grep -q "^stragglers at iter [0-9]* (compute time per step since the last log over 2x the median rank's): rank 1 (compute" "$work/out" ||
  { echo "FAIL: no straggler line in the log"; fail=1; }
[ "$fail" -eq 0 ] || { tail -5 "$work/out"; cat "$work/err"; }
exit "$fail"
