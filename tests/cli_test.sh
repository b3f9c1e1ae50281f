#!/usr/bin/env bash
# Bad input to the meshflow CLI: each case must exit non-zero with exactly one line on stderr,
# "meshflow: error: ..." containing the expected words, and leave no partial checkpoint.
# Usage: cli_test.sh MESHFLOW_BINARY SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
pass=0
fail=0

printf 'the cat sat on the mat.\n%%\na dog ran far away.\n%%\n' > "$work/corpus.txt"
for i in $(seq 1 40); do printf 'line %d of the tiny corpus, with some words.\n%%\n' "$i" >> "$work/corpus.txt"; done
"$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null || { echo "preprocess failed"; exit 1; }
# tokenization.append_eod is preprocess's default (from --config); --append-eod / --no-eod win.
# 42 documents: without the end-of-document token the dataset is 42 tokens shorter.
printf 'tokenization:\n  tokenizer: byte\n  append_eod: false\n' > "$work/no_eod.yaml"
tokens() {  # output name, flags...: the token count preprocess reports
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/$1" "${@:2}" | grep -o '[0-9]* tokens' | cut -d' ' -f1
}
with_eod=$(tokens e1 --tokenizer byte)
config_no_eod=$(tokens e2 --config "$work/no_eod.yaml")
flag_no_eod=$(tokens e3 --tokenizer byte --no-eod)
flag_over_config=$(tokens e4 --config "$work/no_eod.yaml" --append-eod)
if [ -n "$with_eod" ] && [ "$config_no_eod" = "$((with_eod - 42))" ] && [ "$flag_no_eod" = "$config_no_eod" ] &&
   [ "$flag_over_config" = "$with_eod" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: append_eod: tokens $with_eod (default), $config_no_eod (config false), $flag_no_eod (--no-eod)," \
       "$flag_over_config (config false, --append-eod)"
fi
good=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
      model.num_layers=1 model.hidden_size=16 model.num_attention_heads=2 model.max_seq_length=16 data.seq_length=16
      train.train_iter=2
      train.evaluation.enabled=false)

expect_error() {  # name, expected substring, command...
  local name=$1 want=$2
  shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  local lines
  lines=$(wc -l < "$work/err")
  if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^meshflow: error: .*$want" "$work/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $name (exit $rc, $lines stderr lines, want '$want'):"
    cat "$work/err"
  fi
}

expect_error "missing data file" "$work/none" "$bin" train "${good[@]}" "data.data_prefix=$work/none" "train.output_dir=$work/o1"
cp "$work/c_text_document.bin" "$work/bad.bin"
head -c 20 "$work/c_text_document.idx" > "$work/bad.idx"
expect_error "corrupt index file" "bad.idx" "$bin" train "${good[@]}" "data.data_prefix=$work/bad" "train.output_dir=$work/o2"
expect_error "unknown model" "unknown model.name \`gpt3\` (registered: bert, gpt2, llama, mistral, mlp_lm, mt5, qwen2, roberta, t5, vit)" "$bin" train "${good[@]}" model.name=gpt3 "train.output_dir=$work/o3"
expect_error "unreadable tokenizer file" "$work/nope.json" "$bin" train "${good[@]}" tokenization.tokenizer=gpt2_bpe \
  "tokenization.vocab_file=$work/nope.json" tokenization.merges_file=data/gpt2/vocab.bpe "train.output_dir=$work/o4"
expect_error "mistyped key" "did you mean \`train.train_iter\`" "$bin" train "${good[@]}" train.train_itr=5
expect_error "wrong value type" "train.train_iter expects an integer" "$bin" train "${good[@]}" train.train_iter=ten
expect_error "missing config" "nope.yaml" "$bin" train "$work/nope.yaml"
mkdir -p "$work/taken" && echo "train: {}" > "$work/taken/config.yaml"
expect_error "output dir of another run" "already holds a run" "$bin" train "${good[@]}" "train.output_dir=$work/taken"
if [ -e "$work/taken/checkpoints" ]; then echo "FAIL: a checkpoint was written into the other run's dir"; fail=$((fail + 1)); fi
expect_error "unknown device type" "train.dist.device_type must be cpu or cuda, got 'tpu'" "$bin" train "${good[@]}" \
  train.dist.device_type=tpu "train.output_dir=$work/o_tpu"
# train.dist.device_type=cuda in a build without CUDA or on a machine without a GPU: one line, no work.
if [ "$("$bin" devices | sed -n 's/^cuda_devices //p')" = 0 ]; then
  expect_error "cuda without a GPU" \
    "train.dist.device_type=cuda: \(this build has no CUDA backend (configure with the CUDA toolkit)\|no CUDA device is visible on this machine\)" \
    "$bin" train "${good[@]}" train.dist.device_type=cuda "train.output_dir=$work/o_cuda"
  if [ -e "$work/o_cuda" ]; then echo "FAIL: the cuda run without a GPU created its output dir"; fail=$((fail + 1)); fi
fi
"$bin" train "${good[@]}" "train.output_dir=$work/ok" > /dev/null 2>&1 || { echo "FAIL: the good run failed"; fail=$((fail + 1)); }
if ls "$work/ok/checkpoints" | grep -q tmp; then echo "FAIL: temporary checkpoint left"; fail=$((fail + 1)); fi
[ -f "$work/ok/checkpoints/iter_0000002/metadata.json" ] || { echo "FAIL: no final checkpoint"; fail=$((fail + 1)); }
# Hugging Face weights: export the run, import it back (the same file again), start a run from it.
"$bin" convert --to-hf "$work/ok" --output "$work/hf" > /dev/null &&
  "$bin" convert --from-hf "$work/hf" --output "$work/imported" > /dev/null &&
  "$bin" convert --to-hf "$work/imported" --output "$work/hf2" > /dev/null || { echo "FAIL: convert failed"; fail=$((fail + 1)); }
cmp -s "$work/hf/model.safetensors" "$work/hf2/model.safetensors" || { echo "FAIL: export -> import -> export changed model.safetensors"; fail=$((fail + 1)); }
"$bin" train "${good[@]}" "model.pretrained=$work/imported" "train.output_dir=$work/pre" > "$work/out" 2>&1 &&
  grep -q "^model.pretrained: .* tensors from $work/imported/" "$work/out" || { echo "FAIL: run from model.pretrained:"; cat "$work/out"; fail=$((fail + 1)); }
want=$("$bin" eval "$work/ok/config.yaml" 2>&1 | grep -o "val_loss [0-9.]*")
got=$("$bin" eval "$work/ok/config.yaml" "train.output_dir=$work/imported" 2>&1 | grep -o "val_loss [0-9.]*")
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "FAIL: eval of the imported checkpoint gives '$got', of the run '$want'"; fail=$((fail + 1)); }
mkdir -p "$work/hf_nocfg" && cp "$work/hf/model.safetensors" "$work/hf_nocfg/"
expect_error "convert without config.json" "$work/hf_nocfg/config.json: not found" "$bin" convert --from-hf "$work/hf_nocfg" --output "$work/o5"
expect_error "convert both ways" "give one of --from-hf and --to-hf" "$bin" convert --from-hf "$work/hf" --to-hf "$work/ok" --output "$work/o6"
expect_error "pretrained of other sizes" "tensor 'transformer.wte.weight' is (257, 16), the model config expects (257, 32)" \
  "$bin" train "${good[@]}" model.hidden_size=32 "model.pretrained=$work/hf" "train.output_dir=$work/o7"
expect_error "missing pretrained" "model.pretrained: $work/none: no such file or directory" \
  "$bin" train "${good[@]}" "model.pretrained=$work/none" "train.output_dir=$work/o8"
printf 'tokenization:\n  append_eodd: false\n' > "$work/bad_key.yaml"
expect_error "preprocess config with a typo" "unknown config key \`tokenization.append_eodd\`" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o9" --config "$work/bad_key.yaml"
[ -e "$work/o9_text_document.bin" ] && { echo "FAIL: o9 written after an error"; fail=$((fail + 1)); }
# Hugging Face tokenizer.json and SentencePiece tokenizer.model (data/tokenizers: scripts/fetch-tokenizers.sh).
expect_error "preprocess hf_bpe without a file" "tokenization.tokenizer hf_bpe needs tokenization.tokenizer_file" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o10" --tokenizer hf_bpe
expect_error "preprocess with a tokenizer.json that is not one" "tokenizer $work/corpus.txt: not valid JSON" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o11" --tokenizer hf_bpe --tokenizer-file "$work/corpus.txt"
expect_error "preprocess with a tokenizer.model that is not one" "SentencePiece model $work/corpus.txt: cannot load" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o12" --tokenizer sentencepiece --tokenizer-model "$work/corpus.txt"
llama3_tokens=$(tokens l3 --tokenizer hf_bpe --tokenizer-file data/tokenizers/llama3)
llama2_tokens=$(tokens l2 --tokenizer sentencepiece --tokenizer-model data/tokenizers/llama2/tokenizer.model --eod-token "<s>")
if [ -n "$llama3_tokens" ] && [ -n "$llama2_tokens" ] && [ "$llama3_tokens" -gt 84 ] && [ "$llama2_tokens" -gt 84 ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: preprocess with Llama 3's tokenizer.json ($llama3_tokens tokens) or Llama 2's tokenizer.model" \
       "($llama2_tokens tokens); are data/tokenizers fetched (bash scripts/fetch-tokenizers.sh)?"
fi
# T5's SentencePiece tokenizer: the folder of scripts/make_t5_tokenizer.sh (spiece.model), 100 sentinels;
# --extra-ids is for sentencepiece only.
t5_tokens=$(tokens t5 --tokenizer sentencepiece --tokenizer-file data/tokenizers/t5-tiny --extra-ids 100)
if [ -n "$t5_tokens" ] && [ "$t5_tokens" -gt 84 ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: preprocess with the tiny T5 tokenizer ($t5_tokens tokens); is data/tokenizers/t5-tiny there" \
       "(bash scripts/make_t5_tokenizer.sh)?"
fi
expect_error "preprocess byte with --extra-ids" \
  "tokenization.extra_ids (100: T5's sentinel tokens) is for tokenization.tokenizer sentencepiece, not byte" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o13" --tokenizer byte --extra-ids 100
expect_error "preprocess with --extra-ids not a number" 'tokenization.extra_ids expects an integer, got "many" (from --extra-ids)' \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o14" --tokenizer sentencepiece \
  --tokenizer-file data/tokenizers/t5-tiny --extra-ids many
for o in o10 o11 o12 o13 o14; do [ -e "$work/${o}_text_document.bin" ] && { echo "FAIL: $o written after an error"; fail=$((fail + 1)); }; done
for o in o5 o6 o7 o8; do [ -e "$work/$o" ] && { echo "FAIL: $o written after an error"; fail=$((fail + 1)); }; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
