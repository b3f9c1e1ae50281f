#!/usr/bin/env bash
# `meshflow generate` under every layout: a tiny byte-level GPT-2 and a tiny Llama (4 heads over 2
# key/value heads, untied head), each trained 2 steps with a large initialisation (clear margins
# between the logits), generate the one-process tokens under tensor parallelism 2 and 4 (the
# byte vocabulary, 257, split unevenly; tp=4 keeps Llama's key/value heads whole), pipeline
# parallelism 2, and tp=2 x pp=2 on 4 ranks. A batch of 3 prompts of different lengths (left-padded
# in the engine), 16 new tokens each (--ignore-eos: every row runs the full length), decoded
# greedily, greedily with a repetition penalty, and sampled with a fixed seed (temperature, top-k,
# top-p and repetition penalty together; temperature and top-p alone), and by beam search (3
# beams: the candidates gathered over the vocabulary split, the caches reordered): the `ids` lines of
# --print-ids must match exactly. Then a layout that makes data-parallel replicas (2 processes, no
# tp/pp) is refused: non-zero exit, one error line per rank naming data parallelism.
# Usage: generate_layouts_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
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
tiny_corpus "$bin" "$work" 40

prompts=(--prompt "the cat sat on the mat, and" --prompt "a dog" --prompt "x")
decodings=(
  "greedy"
  "greedy_rep --repetition-penalty 1.5"
  "sample --do-sample --temperature 0.8 --top-k 40 --top-p 0.9 --repetition-penalty 1.3 --seed 7"
  "sample_p --do-sample --temperature 1.5 --top-p 0.6 --seed 123"
  "beam --num-beams 3"
)
layouts=(
  "tp2 2 train.dist.tensor_parallel_size=2"
  "tp4 4 train.dist.tensor_parallel_size=4"
  "pp2 2 train.dist.pipeline_parallel_size=2"
  "tp2pp2 4 train.dist.tensor_parallel_size=2 train.dist.pipeline_parallel_size=2"
)
# MESHFLOW_TEST_QUICK=1 (the sanitizer build): greedy and the sampling with every processor, under
# tp=2 x pp=2 only (the Release run keeps every decoding and layout).
if [ "${MESHFLOW_TEST_QUICK:-0}" = 1 ]; then
  decodings=("${decodings[0]}" "${decodings[2]}")
  layouts=("${layouts[3]}")
fi

generate() {  # out file, ranks, overrides and flags...
  local out=$1 np=$2
  shift 2
  local launch=()
  [ "$np" -gt 1 ] && launch=("$mpiexec" --allow-run-as-root --oversubscribe -np "$np")
  "${launch[@]}" "$bin" generate "${cfg[@]}" "$@" "${prompts[@]}" --max-new-tokens 16 --ignore-eos --print-ids \
    > "$out.log" 2> "$out.err"
}

for model in gpt2 llama; do
  cfg=("configs/$model/tiny.yaml" tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
       model.num_layers=2 model.hidden_size=32 model.num_attention_heads=4 model.ffn_hidden_size=64
       model.max_seq_length=64 data.seq_length=64 model.initializer_range=0.3 train.train_iter=2
       train.train_micro_batch_size=2 train.evaluation.enabled=false "train.output_dir=$work/$model")
  [ "$model" = llama ] && cfg+=(model.num_key_value_heads=2)
  "$bin" train "${cfg[@]}" > "$work/train_$model.log" 2>&1 ||
    { echo "FAIL: training $model:"; tail -5 "$work/train_$model.log"; fail=1; continue; }
  for decoding in "${decodings[@]}"; do
    set -- $decoding
    dname=$1
    shift
    flags=("$@")
    ref=$work/${model}_${dname}_one
    if ! generate "$ref" 1 "${flags[@]}"; then
      echo "FAIL: $model $dname one process exited non-zero:"; tail -5 "$ref.err"; fail=1; continue
    fi
    grep '^ids ' "$ref.log" > "$ref.ids"
    if [ "$(wc -l < "$ref.ids")" -ne 3 ] || [ "$(grep -c ' (length)$' "$ref.ids")" -ne 3 ]; then
      echo "FAIL: $model $dname one process: want 3 rows of 16 tokens (length), got:"; cat "$ref.ids"; fail=1; continue
    fi
    for layout in "${layouts[@]}"; do
      set -- $layout
      lname=$1 np=$2
      shift 2
      out=$work/${model}_${dname}_$lname
      if ! generate "$out" "$np" "$@" "${flags[@]}"; then
        echo "FAIL: $model $dname $lname exited non-zero:"; tail -5 "$out.err"; fail=1; continue
      fi
      grep '^ids ' "$out.log" > "$out.ids"
      if cmp -s "$ref.ids" "$out.ids"; then
        echo "$model $dname $lname: the one-process tokens"
      else
        echo "FAIL: $model $dname $lname: tokens differ from one process"
        echo "--- one process:"; cat "$ref.ids"
        echo "--- $lname:"; cat "$out.ids"
        fail=1
      fi
    done
  done
  # Greedy and sampled tokens must differ (the sampling flags reach the engine).
  if cmp -s "$work/${model}_greedy_one.ids" "$work/${model}_sample_one.ids"; then
    echo "FAIL: $model: sampling produced the greedy tokens"; fail=1
  fi
done

# Data-parallel replicas: refused before any work, non-zero exit, every rank with exactly one error
# line (the reason, or "terminated by the launcher" for a rank ended because a faster one already
# failed), at least one naming data parallelism; no tokens.
cfg=("configs/gpt2/tiny.yaml" tokenization.tokenizer=byte model.vocab_size=257 model.num_layers=2 model.hidden_size=32
     model.num_attention_heads=4 model.ffn_hidden_size=64 model.max_seq_length=64 "train.output_dir=$work/gpt2")
generate "$work/dp2" 2
rc=$? ok=1
for r in 0 1; do
  [ "$(grep -c "^meshflow: error: \[rank $r/2\] " "$work/dp2.err")" -eq 1 ] || ok=0
done
grep -q '^meshflow: error: \[rank [01]/2\] generate: .*data-parallel' "$work/dp2.err" || ok=0
grep -q '^ids ' "$work/dp2.log" && ok=0
if [ "$rc" -eq 0 ] || [ "$ok" -ne 1 ]; then
  echo "FAIL: generate under 2 data-parallel processes (exit $rc): want one error line per rank naming data parallelism:"
  cat "$work/dp2.log" "$work/dp2.err"; fail=1
else
  echo "dp2: refused: $(grep -m1 'data-parallel' "$work/dp2.err")"
fi

[ "$fail" -eq 0 ] && echo "PASS" || echo "FAILED"
exit "$fail"
