#!/usr/bin/env bash
# model.pretrained under parallel layouts, for GPT-2 and a Qwen2 (q/k/v biases, tied head, 4 heads
# over 2 key/value heads): weights exported to Hugging Face's format by one process load on every
# rank of a tp=2, a pp=2 and a ZeRO-3 dp=2 run (each rank its stage's tensors, sliced to its
# tensor-parallel pieces, ZeRO slicing after), and those runs log the losses of one process
# starting from the same weights (to 1e-5; same global micro-batch and accumulation steps). The
# pretrained start is not the random one. A few seconds in all.
# Usage: pretrained_parallel_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
fail=0
export OMP_NUM_THREADS=1

source tests/tiny_corpus.sh
tiny_corpus "$bin" "$work" 100
common=(tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
        model.num_layers=2 model.hidden_size=32 model.num_attention_heads=4 model.ffn_hidden_size=64
        model.max_seq_length=32 data.seq_length=31 train.train_iter=4 train.global_batch_size=4 train.log_period=1
        train.evaluation.enabled=false train.checkpointer.period=0)

check_model() {  # tag, tensors the export holds, then the model's config and overrides
  tag=$1 tensors=$2
  shift 2
  args=("$@" "${common[@]}")
  run() {  # name, ranks, overrides...
    local name=$1 np=$2
    shift 2
    local launch=()
    [ "$np" -gt 1 ] && launch=("$mpiexec" --allow-run-as-root --oversubscribe -np "$np")
    "${launch[@]}" "$bin" train "${args[@]}" "$@" "train.output_dir=$work/$tag$name" > "$work/log_$tag$name" 2>&1 ||
      { echo "FAIL: $tag$name exited non-zero:"; tail -20 "$work/log_$tag$name"; fail=1; }
  }
  losses() { grep -o '"loss":[^,}]*' "$work/$tag$1/metrics.jsonl" | cut -d: -f2; }

  run random 1 train.train_micro_batch_size=4                       # the weights: 4 steps from random init
  "$bin" convert --to-hf "$work/${tag}random" --output "$work/${tag}hf" > /dev/null || { echo "FAIL: convert --to-hf"; exit 1; }
  pre=("model.pretrained=$work/${tag}hf")
  run one 1 train.train_micro_batch_size=4 "${pre[@]}"
  run one_mb2 1 train.train_micro_batch_size=2 "${pre[@]}"       # 2 micro-batches of 2
  run tp2 2 train.train_micro_batch_size=4 train.dist.tensor_parallel_size=2 "${pre[@]}"
  run pp2 2 train.train_micro_batch_size=2 train.dist.pipeline_parallel_size=2 "${pre[@]}"
  run z3dp2 2 train.train_micro_batch_size=2 train.zero_optimization.enabled=true train.zero_optimization.stage=3 "${pre[@]}"

  compare() {  # reference, run
    if ! paste <(losses "$1") <(losses "$2") |
         awk -v a="$tag$1" -v b="$tag$2" '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > max) max = r
                                    if (r > 1e-5) { printf "FAIL: step %d: %s loss %s, %s loss %s\n", NR, a, $1, b, $2; bad = 1 } }
                                  END { if (NR != 4) { printf "FAIL: %s: %d losses, want 4\n", b, NR; bad = 1 }
                                        printf "%s vs %s: max relative loss difference %.2e\n", b, a, max; exit bad }'; then
      fail=1
    fi
  }
  compare one tp2
  compare one_mb2 pp2
  compare one z3dp2
  for name in one tp2 pp2 z3dp2; do
    grep -q "^model.pretrained: $tensors tensors from $work/${tag}hf/model.safetensors" "$work/log_$tag$name" ||
      { echo "FAIL: $tag$name does not report the pretrained weights:"; head -3 "$work/log_$tag$name"; fail=1; }
  done
  # The same first batch: the random start's loss is not the pretrained one's (trained 4 steps).
  if [ "$(losses random | head -1)" = "$(losses one | head -1)" ]; then echo "FAIL: the $tag pretrained run starts from the random weights"; fail=1; fi
}

check_model gpt2_ 28 configs/gpt2/tiny.yaml
check_model qwen2_ 26 configs/llama/tiny.yaml model.name=qwen2 model.num_key_value_heads=2 model.qkv_bias=true \
  model.tie_word_embeddings=true
[ "$fail" -eq 0 ] && echo "model.pretrained under tp=2, pp=2 and ZeRO-3 dp=2 matches one process (GPT-2, Qwen2)"
exit "$fail"
