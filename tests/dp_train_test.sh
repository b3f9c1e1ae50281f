#!/usr/bin/env bash
# Data parallelism through the command line, under mpirun:
#  1. exactness: a small GPT (dropout on) trained 20 steps with dp=2 and dp=4 logs the dp=1
#     losses to 1e-5 relative, same global batch of 8 sequences (from metrics.jsonl);
#  2. every step's comm_bytes (the gradient all-reduce) scales as 2(N-1)/N: dp=4 sends 1.5x
#     what dp=2 sends, within 1% (the exact byte count is checked in meshflow_mpi_tests);
#  3. a world size that does not match train.dist fails on every rank with one error line each,
#     before any work (no output directory).
# Usage: dp_train_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
fail=0
export OMP_NUM_THREADS=1

printf 'the cat sat on the mat.\n%%\na dog ran far away.\n%%\n' > "$work/corpus.txt"
for i in $(seq 1 200); do printf 'line %d of the small corpus, with some words and %d more.\n%%\n' "$i" "$((i * 7))" >> "$work/corpus.txt"; done
"$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null || { echo "preprocess failed"; exit 1; }
args=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
      model.num_layers=2 model.hidden_size=32 model.num_attention_heads=4 model.ffn_hidden_size=128
      model.max_seq_length=32 data.seq_length=32 train.train_iter=20 train.global_batch_size=8 train.log_period=1
      train.evaluation.enabled=false train.checkpointer.period=0 train.dist.grad_bucket_mb=0.01)

run() {  # ranks, micro batch
  local np=$1 mb=$2 out=$work/dp$1
  local launch=()
  [ "$np" -gt 1 ] && launch=("$mpiexec" --allow-run-as-root --oversubscribe -np "$np")
  if ! "${launch[@]}" "$bin" train "${args[@]}" train.train_micro_batch_size="$mb" "train.output_dir=$out" > "$work/log$np" 2>&1; then
    echo "FAIL: training with dp=$np exited non-zero:"; tail -20 "$work/log$np"; fail=1
  fi
}
field() {  # metrics file, key: one value per line
  grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2
}

run 1 8
run 2 4
run 4 2
for np in 2 4; do
  n=$(field "$work/dp$np/metrics.jsonl" loss | wc -l)
  [ "$n" -eq 20 ] || { echo "FAIL: dp=$np logged $n losses, want 20"; fail=1; }
  if ! paste <(field "$work/dp1/metrics.jsonl" loss) <(field "$work/dp$np/metrics.jsonl" loss) |
       awk -v np="$np" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > max) max = r
                          if (r > 1e-5) { printf "FAIL: step %d: dp=1 loss %s, dp=%s loss %s (relative %.2e)\n", NR, $1, np, $2, r; bad = 1 } }
                        END { printf "dp=%s vs dp=1: %d steps, max relative loss difference %.2e\n", np, NR, max; exit bad }'; then
    fail=1
  fi
done
paste <(field "$work/dp2/metrics.jsonl" comm_bytes) <(field "$work/dp4/metrics.jsonl" comm_bytes) |
  awk '{ r = $2 / $1; if (r < 1.5 * 0.99 || r > 1.5 * 1.01) { printf "FAIL: step %d: dp=4 sent %s bytes, dp=2 %s: ratio %.4f, want 1.5\n", NR, $2, $1, r; bad = 1 } }
       END { if (NR != 20) { print "FAIL: comm_bytes missing"; bad = 1 } exit bad }' || fail=1

# A mesh that does not fit the world: one line per rank, nothing written.
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$bin" train "${args[@]}" train.dist.data_parallel_size=4 \
  "train.output_dir=$work/bad" > "$work/out" 2> "$work/err"
rc=$?
lines=$(grep -c "^meshflow: error: \[rank [01]/2\] device mesh: .*does not equal the world size 2" "$work/err")
if [ "$rc" -eq 0 ] || [ "$lines" -ne 2 ] || [ -e "$work/bad" ]; then
  echo "FAIL: world size mismatch (exit $rc, $lines rank error lines, output dir exists: $([ -e "$work/bad" ] && echo yes || echo no)):"
  cat "$work/err"; fail=1
fi
[ "$fail" -eq 0 ] && echo "data-parallel CLI tests passed"
exit "$fail"
