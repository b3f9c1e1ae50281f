#!/usr/bin/env bash
# The small GPT trains on one GPU to the CPU's losses (issue 9, must-show 2), through the command
# line (ctest cuda.train.parity, label cuda; exit 77 = skipped when no GPU is visible):
#  1. f32, dropout on (the tiny config's 0.1): 20 steps on cpu and on cuda, every step's loss
#     within 1e-4 relative (from metrics.jsonl), and the final validation loss too;
#  2. the same without dropout (plain numerics, reported beside 1 to tell the two apart);
#  3. the cuda run stopped at step 10 (checkpoint written from the GPU) and resumed logs the
#     uninterrupted cuda run's losses to 1e-5;
#  4. bf16 mixed precision runs on cuda with finite losses within 2e-2 of the cpu bf16 run;
#  5. ZeRO-1 and the data-parallel code paths on one GPU: dp=1 takes no communicator, so only
#     the memory report and MFU fields are checked to be present and positive.
# Usage: gpu_train_parity_test.sh MESHFLOW_BINARY SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
ndev=$("$bin" devices 2>/dev/null | sed -n 's/^cuda_devices //p')
if [ "${ndev:-0}" = 0 ]; then
  echo "SKIP: no CUDA device is visible (or this build has no CUDA backend); cuda.train.parity needs one GPU"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
fail=0
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
"$bin" devices

source tests/tiny_corpus.sh
tiny_corpus "$bin" "$work" 200
args=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
      model.num_layers=4 model.hidden_size=64 model.num_attention_heads=4 model.ffn_hidden_size=256
      model.max_seq_length=64 data.seq_length=63 train.train_iter=20 train.train_micro_batch_size=4
      train.global_batch_size=8 train.log_period=1 train.evaluation.eval_period=0 train.evaluation.eval_iter=2
      train.checkpointer.period=0)

run() {  # name, device, extra overrides...
  local name=$1 dev=$2
  shift 2
  local t0=$SECONDS
  if ! "$bin" train "${args[@]}" train.dist.device_type="$dev" "train.output_dir=$work/$name" "$@" > "$work/log_$name" 2>&1; then
    echo "FAIL: $name exited non-zero:"; tail -20 "$work/log_$name"; fail=1
  fi
  echo "ran $name on $dev in $((SECONDS - t0)) s"
}
field() {  # metrics file, key: one value per line
  grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2
}
compare() {  # tolerance, reference, run, [key]
  local tol=$1 ref=$2 name=$3 key=${4:-loss}
  local n
  n=$(field "$work/$name/metrics.jsonl" "$key" | wc -l)
  [ "$n" -ge 1 ] || { echo "FAIL: $name logged no $key"; fail=1; return; }
  if ! paste <(field "$work/$ref/metrics.jsonl" "$key") <(field "$work/$name/metrics.jsonl" "$key") |
       awk -v name="$name" -v ref="$ref" -v tol="$tol" -v key="$key" '
         { d = $1 - $2; if (d < 0) d = -d; a = ($1 < 0 ? -$1 : $1); r = (a > 0 ? d / a : d); if (r > max) max = r
           if (!($2 == $2 + 0) || r > tol) { printf "FAIL: line %d: %s %s %s, %s %s %s (relative %.2e)\n", NR, ref, key, $1, name, key, $2, r; bad = 1 } }
         END { printf "%s vs %s: %d values of %s, max relative difference %.2e (tolerance %s)\n", name, ref, NR, key, max, tol; exit bad }'; then
    fail=1
  fi
}

run cpu_f32 cpu
run gpu_f32 cuda
compare 1e-4 cpu_f32 gpu_f32 loss
compare 1e-4 cpu_f32 gpu_f32 val_loss
grep -q "^device: cuda:" "$work/log_gpu_f32" || { echo "FAIL: the cuda run did not log its device"; fail=1; }

nodrop=(model.embedding_dropout_prob=0.0 model.attention_dropout_prob=0.0 model.output_dropout_prob=0.0)
run cpu_nodrop cpu "${nodrop[@]}"
run gpu_nodrop cuda "${nodrop[@]}"
compare 1e-4 cpu_nodrop gpu_nodrop loss

run gpu_stop cuda train.exit_iter=10
run gpu_stop cuda train.resume=true
compare 1e-5 gpu_f32 gpu_stop loss

run cpu_bf16 cpu train.amp.enabled=true train.amp.dtype=bf16
run gpu_bf16 cuda train.amp.enabled=true train.amp.dtype=bf16
compare 2e-2 cpu_bf16 gpu_bf16 loss

for key in mfu tokens_per_sec mem_parameters mem_optimizer_state; do
  v=$(field "$work/gpu_f32/metrics.jsonl" "$key" | tail -1)
  awk -v v="${v:-0}" 'BEGIN { exit !(v + 0 > 0) }' || { echo "FAIL: gpu_f32 metrics.jsonl: $key is '${v}', want > 0"; fail=1; }
done
echo "gpu_f32 last step: $(grep "\"loss\":" "$work/gpu_f32/metrics.jsonl" | tail -1 | cut -c1-400)"

if [ "$fail" -ne 0 ]; then
  echo "cuda.train.parity: FAILED"; exit 1
fi
echo "cuda.train.parity: passed"
