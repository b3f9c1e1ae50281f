#!/usr/bin/env bash
# Context parallelism on a long sequence: a tiny Llama (configs/llama/tiny.yaml: 4 layers, hidden
# 128, 4 heads over 2 key/value heads) trained on one sequence of SEQ tokens (default 16384) of the
# fortunes corpus, under cp = 1, 2 and 4 (ring, causal chunks load-balanced) and cp = 2 all_to_all.
# Each run takes STEPS steps (default 3; the figures are the last step's). Per run it prints, from
# metrics.jsonl: the largest rank's activation bytes kept for backward (mem_activations, measured
# by the allocator) and peak bytes (peak_bytes), and tokens/s; then the activation ratio against
# cp = 1 (1/cp is the ideal) and, from the measured bytes per token, the longest sequence one rank
# could train in MEM_GB of memory (default: this machine's MemAvailable), at cp = 1 and cp = 4.
# Speed: cp = 2 (2 processes of 1 thread) against one process of 2 threads and of 1 thread, the
# same global work (one sequence per step), in this one run.
# Usage: bench/context_parallel.sh [SEQ] [STEPS]   (from the repository root, after the build and
# the quickstart's data: data/fortunes_text_document.*)
set -euo pipefail
seq_len=${1:-16384}
steps=${2:-3}
bin=${MESHFLOW_BIN:-./build/meshflow}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f data/fortunes_text_document.bin ] || { echo "bench: data/fortunes_text_document.bin is missing: run the quickstart's preprocess first"; exit 1; }
common=(configs/llama/tiny.yaml "model.max_seq_length=$seq_len" "data.seq_length=$seq_len" train.train_micro_batch_size=1
        train.global_batch_size=1 "train.train_iter=$steps" train.log_period=1 train.evaluation.enabled=false
        train.checkpointer.period=0 train.dist.heartbeat=false)

last() {  # metrics file, key: the last step's value (the largest over ranks for the memory keys)
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = rows[-1]
key = sys.argv[2]
if key.startswith("mem_") or key == "peak_bytes":
    print(max(x[key] for x in r.get("ranks", [r])))
else:
    print(r[key])
PY
}

run() {  # name, processes, threads, overrides...
  local name=$1 np=$2 threads=$3
  shift 3
  local launch=()
  [ "$np" -gt 1 ] && launch=(mpirun --oversubscribe -np "$np")
  OMP_NUM_THREADS=$threads "${launch[@]}" "$bin" train "${common[@]}" "$@" "train.output_dir=$out/$name" \
    > "$out/log_$name" 2>&1 || { echo "bench: $name failed:"; tail -5 "$out/log_$name"; exit 1; }
  local m=$out/$name/metrics.jsonl
  printf '%-14s %3s ranks x %s threads  activations %8.1f MB  peak %8.1f MB  %8.1f tokens/s\n' "$name" "$np" "$threads" \
    "$(awk -v x="$(last "$m" mem_activations)" 'BEGIN { print x / 1e6 }')" \
    "$(awk -v x="$(last "$m" peak_bytes)" 'BEGIN { print x / 1e6 }')" \
    "$(last "$m" tokens_per_sec)"
}

echo "context parallelism: tiny Llama, one sequence of $seq_len tokens per step, $steps steps; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
run cp1_t2 1 2
run cp1 1 1
run cp2 2 1 train.dist.context_parallel_size=2
run cp2_a2a 2 1 train.dist.context_parallel_size=2 train.dist.context_parallel_mode=all_to_all
run cp4 4 1 train.dist.context_parallel_size=4

act() { last "$out/$1/metrics.jsonl" mem_activations; }
tps() { last "$out/$1/metrics.jsonl" tokens_per_sec; }
mem_gb=${MEM_GB:-$(awk '/MemAvailable/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)}
python3 - "$(act cp1)" "$(act cp2)" "$(act cp4)" "$(tps cp1_t2)" "$(tps cp1)" "$(tps cp2)" "$(tps cp2_a2a)" "$seq_len" "$mem_gb" <<'PY'
import sys
a1, a2, a4, t12, t1, t2, ta, seq, mem_gb = map(float, sys.argv[1:])
print(f"activations per rank vs cp=1: cp=2 {a2 / a1:.3f} (ideal 0.5), cp=4 {a4 / a1:.3f} (ideal 0.25)")
per_token = a1 / seq
print(f"longest sequence one rank holds in {mem_gb:.1f} GB of activations (extrapolated from the measured "
      f"{per_token / 1e3:.1f} kB per token at cp=1, {a4 / seq / 1e3:.1f} kB at cp=4): "
      f"cp=1 {mem_gb * 1e9 / per_token:,.0f} tokens, cp=4 {mem_gb * 1e9 / (a4 / seq):,.0f} tokens")
print(f"tokens/s, same global work: cp=2 ring / one process of 2 threads {t2 / t12:.2f}, "
      f"/ one process of 1 thread {t2 / t1:.2f}; cp=2 all_to_all / 2 threads {ta / t12:.2f}")
PY
