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

# meshflow plan / graph.auto_parallel: an unknown hardware profile, a damaged profile file, no layout
# fitting the memory (the reasons counted).
expect_error "unknown hardware profile" "unknown hardware profile 'tpu9': give host, a100-80gb, h100-80gb" \
  "$bin" plan "${good[@]}" --nproc 2 --hardware tpu9
echo '{"name": "x"}' > "$work/profile.json"
expect_error "damaged hardware profile" "the hardware profile $work/profile.json is not one \`meshflow profile\` writes" \
  "$bin" plan "${good[@]}" --nproc 2 --hardware "$work/profile.json"
expect_error "profile --published of a measured machine" "profile --published: give a published profile's name (a100-80gb, h100-80gb), not 'host'" \
  "$bin" profile --published host --output "$work/host.json"
# A published profile written to a file plans as the built-in one does.
if "$bin" profile --published a100-80gb --output "$work/a100.json" > /dev/null &&
  cmp -s <("$bin" plan "${good[@]}" --nproc 2 --hardware a100-80gb --json) \
    <("$bin" plan "${good[@]}" --nproc 2 --hardware "$work/a100.json" --json); then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: profile --published a100-80gb does not plan as --hardware a100-80gb"
fi
expect_error "nothing fits" "no layout of GPT-2: .* fits on 2 ranks with 1e-09 GB each: .*memory (" \
  "$bin" plan "${good[@]}" --nproc 2 --memory-per-rank 0.000000001
expect_error "plan --measure off mpirun" "plan --measure: the plans are for 2 ranks and this job has 1 (run it as mpirun -np 2" \
  "$bin" plan "${good[@]}" --nproc 2 --measure 1
expect_error "auto-parallel: nothing fits" "graph.auto_parallel: no layout of GPT-2: .* fits on 1 ranks" \
  "$bin" train "${good[@]}" graph.auto_parallel.enabled=true graph.auto_parallel.memory_per_rank_gb=1e-9 "train.output_dir=$work/o0"
expect_error "missing data file" "$work/none" "$bin" train "${good[@]}" "data.data_prefix=$work/none" "train.output_dir=$work/o1"
cp "$work/c_text_document.bin" "$work/bad.bin"
head -c 20 "$work/c_text_document.idx" > "$work/bad.idx"
expect_error "corrupt index file" "bad.idx" "$bin" train "${good[@]}" "data.data_prefix=$work/bad" "train.output_dir=$work/o2"
expect_error "unknown model" "unknown model.name \`gpt3\` (registered: bert, gpt2, gpt_neox, llama, mistral, mlp_lm, mt5, qwen2, roberta, t5, vit)" "$bin" train "${good[@]}" model.name=gpt3 "train.output_dir=$work/o3"
expect_error "unreadable tokenizer file" "$work/nope.json" "$bin" train "${good[@]}" tokenization.tokenizer=gpt2_bpe \
  "tokenization.vocab_file=$work/nope.json" tokenization.merges_file=data/gpt2/vocab.bpe "train.output_dir=$work/o4"
# A device where a tokenizer file belongs is refused at once (it was read without end).
expect_error "tokenizer file that is a device" "tokenization.vocab_file '/dev/zero' is a character device, not a regular file" \
  timeout 20 "$bin" train "${good[@]}" tokenization.tokenizer=gpt2_bpe tokenization.vocab_file=/dev/zero \
  tokenization.merges_file=data/gpt2/vocab.bpe "train.output_dir=$work/o4z"
expect_error "preprocess with a tokenizer.json that is a device" "tokenization.tokenizer_file '/dev/zero' is a character device" \
  timeout 20 "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o11z" --tokenizer hf_bpe --tokenizer-file /dev/zero
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
# eval runs in one process whatever layout the config names (a tp or pp run's config.yaml).
got=$("$bin" eval "$work/ok/config.yaml" train.dist.tensor_parallel_size=2 train.dist.pipeline_parallel_size=2 2>&1 | grep -o "val_loss [0-9.]*")
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "FAIL: eval under a tp2 pp2 config gives '$got', in one process '$want'"; fail=$((fail + 1)); }
expect_error "virtual stages without a pipeline" "train.dist.virtual_pipeline_size 2 splits each pipeline stage into chunks: it needs train.dist.pipeline_parallel_size > 1" \
  "$bin" train "${good[@]}" train.dist.virtual_pipeline_size=2 train.dist.pipeline_schedule=interleaved_1f1b "train.output_dir=$work/o24"
expect_error "stage ids without a pipeline" "train.dist.custom_pipeline_stage_id names stage 1, but there is no pipeline" \
  "$bin" train "${good[@]}" "train.dist.custom_pipeline_stage_id=[1]" "train.output_dir=$work/o25"
# train.resume of the finished run (a copy of a 2-layer one): a model with fewer layers is refused,
# not loaded in part; a train_iter before the checkpoint is an error, one equal to it has nothing to do.
"$bin" train "${good[@]}" model.num_layers=2 "train.output_dir=$work/ok2" > /dev/null 2>&1 || { echo "FAIL: the 2-layer run failed"; fail=$((fail + 1)); }
expect_error "resume with fewer layers" "tensor 'transformer.h.1.attn.c_attn.bias' is not a parameter of this model (GPT-2: layers 1," \
  "$bin" train "${good[@]}" train.resume=true "train.output_dir=$work/ok2"
expect_error "resume past train_iter" "train.resume: checkpoint .*iter_0000002 is at iteration 2, past train.train_iter=1" \
  "$bin" train "${good[@]}" model.num_layers=2 train.resume=true train.train_iter=1 "train.output_dir=$work/ok2"
"$bin" train "${good[@]}" model.num_layers=2 train.resume=true "train.output_dir=$work/ok2" > "$work/out" 2>&1 &&
  grep -q "^train.resume: the checkpoint is at iteration 2 = train.train_iter: nothing left to train" "$work/out" && ! grep -q nan "$work/out" ||
  { echo "FAIL: resume of a finished run:"; cat "$work/out"; fail=$((fail + 1)); }
# A resumed step that is not logged is still a step: the run is not "nothing left to train".
"$bin" train "${good[@]}" model.num_layers=2 train.resume=true train.train_iter=4 train.exit_iter=3 train.log_period=10 \
  "train.output_dir=$work/ok2" > "$work/out" 2>&1 && ! grep -q "nothing left" "$work/out" &&
  [ -f "$work/ok2/checkpoints/iter_0000003/metadata.json" ] || { echo "FAIL: an unlogged resumed step:"; cat "$work/out"; fail=$((fail + 1)); }
# Flags and paths: the option parser's errors in the one-line form, ranges that bound what a flag
# may ask for, folders where files go and files where folders go.
expect_error "no config" "config is required (meshflow train --help)" "$bin" train
expect_error "port out of range" "--port: Value 70000 not in range 0 to 65535" "$bin" serve "$work/ok/config.yaml" --port 70000
expect_error "max-new-tokens 0" "--max-new-tokens: Value 0 not in range 1 to" "$bin" generate "$work/ok/config.yaml" --prompt x --max-new-tokens 0
expect_error "length penalty nan" "generate: --length-penalty must be finite, got nan" \
  "$bin" generate "$work/ok/config.yaml" --prompt x --num-beams 2 --length-penalty nan
expect_error "preprocess format" "--format: bogus not in {auto,jsonl,text}" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/o21" --format bogus
expect_error "preprocess threads" "--threads: Value 100000 not in range 1 to 1024" \
  "$bin" preprocess --images "$work" --output-prefix "$work/o22" --threads 100000
expect_error "preprocess empty prefix" "--output-prefix '' names no file prefix" \
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix ""
expect_error "preprocess input folder" "--input $work is a folder; give its files" \
  "$bin" preprocess --input "$work" --output-prefix "$work/o23"
expect_error "empty output_dir" "train.output_dir is empty: give a folder" "$bin" train "${good[@]}" train.output_dir=
expect_error "output_dir a file" "train.output_dir '$work/corpus.txt': cannot create the folder (Not a directory)" \
  "$bin" train "${good[@]}" "train.output_dir=$work/corpus.txt"
expect_error "config a run folder" "config $work/ok is a folder; a run's config is $work/ok/config.yaml" "$bin" eval "$work/ok"
expect_error "hardware profile a folder" "the hardware profile $work is a folder" \
  "$bin" plan "${good[@]}" --nproc 2 --hardware "$work"
expect_error "profile to an empty name" "cannot write a file named '': give a file name" \
  "$bin" profile --published a100-80gb --output ""
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
# Llama 2's tokenizer.json (BPE with byte fallback) writes the same dataset as its tokenizer.model.
llama2_json_tokens=$(tokens l2j --tokenizer hf_bpe --tokenizer-file data/tokenizers/llama2/tokenizer.json --eod-token "<s>")
if [ -n "$llama2_json_tokens" ] && [ "$llama2_json_tokens" = "$llama2_tokens" ] &&
   cmp -s "$work/l2_text_document.bin" "$work/l2j_text_document.bin"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: preprocess with Llama 2's tokenizer.json ($llama2_json_tokens tokens) differs from its tokenizer.model" \
       "($llama2_tokens tokens); is data/tokenizers/llama2/tokenizer.json fetched (bash scripts/fetch-tokenizers.sh)?"
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
# ---- Found when tried as a new user would: each case failed before its fix.
: > "$work/empty.yaml"
expect_error "empty config file" "config $work/empty.yaml is empty" "$bin" train "$work/empty.yaml"
expect_error "unknown command" "unknown command 'frobnicate'; the commands are train, eval" "$bin" frobnicate
expect_error "negative learning rate" "optim.lr=-1 is outside its range \[0, inf)" "$bin" train "${good[@]}" optim.lr=-1 "train.output_dir=$work/o15"
# Sizes past int64 (each once a segfault): a micro-batch whose tokens overflow, a position table too big to count.
expect_error "tokens per step overflow" "9223372036854775807 x 16 overflows int64" "$bin" train "${good[@]}" \
  train.train_micro_batch_size=9223372036854775807 "train.output_dir=$work/o16"
expect_error "model size overflow" "has more elements than int64" "$bin" train "${good[@]}" \
  model.max_seq_length=9223372036854775807 "train.output_dir=$work/o17"
# A model the host cannot hold: one line before any weight (once the kernel killed the process as
# the weights were initialised; a huge layer count first spent minutes listing them).
expect_error "model larger than the host" "the model does not fit: GPT-2: layers 1, hidden 1048576, .* of parameters, gradients and AdamW state on each rank (dp 1, tp 1, pp 1: .*); this host has .* of memory and" \
  "$bin" train "${good[@]}" model.hidden_size=1048576 "train.output_dir=$work/o18"
expect_error "layers past the host's memory" "1000000000000 layers of at least 18064 parameters each need more than 72256000.0 GB on each rank" \
  "$bin" train "${good[@]}" model.num_layers=1000000000000 "train.output_dir=$work/o19"
# A parameter count past int64 (hidden 999999936, MLP 4 x hidden: 1.2e19 in one GPT-2 layer) is counted,
# not wrapped negative (once the wrapped count passed the fit check and the weights were allocated).
expect_error "parameter count past int64" "the model does not fit: GPT-2: layers 1, hidden 999999936, .* (1.2e+19 parameters) holds" \
  "$bin" train "${good[@]}" model.hidden_size=999999936 model.ffn_hidden_size=0 "train.output_dir=$work/o18b"
expect_error "eval of a model larger than the host" "the model does not fit: GPT-2: layers 1, hidden 1048576, .* of parameters on each rank (tp 1, pp 1); this host has" \
  "$bin" eval "${good[@]}" model.hidden_size=1048576 "train.output_dir=$work/o20"
expect_error "eval of a tp2 config larger than the host" "the model does not fit: .* of parameters on each rank (tp 1, pp 1); this host has" \
  "$bin" eval "${good[@]}" model.hidden_size=1048576 train.dist.tensor_parallel_size=2 "train.output_dir=$work/o20"
# `meshflow launch` refuses before any attempt: a --min-nproc that cannot hold tp, a folder holding a run.
expect_error "launch: --min-nproc below tp" "launch: 3 processes cannot hold tensor_parallel_size 2" \
  "$bin" launch --nproc 4 --min-nproc 3 "${good[@]}" train.dist.tensor_parallel_size=2 "train.output_dir=$work/launch1"
mkdir -p "$work/launch2/checkpoints"
expect_error "launch over a run" "train.output_dir '$work/launch2' already holds a run" \
  "$bin" launch --nproc 1 "${good[@]}" "train.output_dir=$work/launch2"
printf '\n\n' > "$work/blank.txt"
expect_error "empty corpus" "$work/blank.txt holds no documents" \
  "$bin" preprocess --input "$work/blank.txt" --output-prefix "$work/o16" --tokenizer byte
[ -e "$work/o16_text_document.bin" ] && { echo "FAIL: o16 written for an empty corpus"; fail=$((fail + 1)); }
echo "keep me" > "$work/a_file"
expect_error "convert onto an existing file" "$work/a_file is an existing file" "$bin" convert --to-hf "$work/ok" --output "$work/a_file"
[ "$(cat "$work/a_file")" = "keep me" ] || { echo "FAIL: convert overwrote a file"; fail=$((fail + 1)); }
expect_error "convert onto an exported model" "already holds model.safetensors" "$bin" convert --to-hf "$work/ok" --output "$work/hf"
# A loss that turns non-finite stops the run before the update, with no checkpoint of those weights.
expect_error "non-finite loss" "iteration [0-9]*: the loss is .*stopped before the update" "$bin" train "${good[@]}" \
  train.train_iter=20 optim.lr=1e30 train.scheduler.warmup_iter=0 optim.clip_grad_max_norm=0 train.checkpointer.period=1 \
  "train.output_dir=$work/o17"
for d in "$work"/o17/checkpoints/iter_*; do
  [ -e "$d" ] || continue
  python3 - "$d" <<'EOF' || { echo "FAIL: a checkpoint with non-finite weights: $d"; fail=$((fail + 1)); }
import json, math, struct, sys, glob
for f in glob.glob(sys.argv[1] + "/shard_*.safetensors"):
    data = open(f, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        b, e = t["data_offsets"]
        vals = struct.unpack("<%df" % ((e - b) // 4), data[8 + n + b:8 + n + e])
        assert all(math.isfinite(v) for v in vals), name
EOF
done
# Resume: `latest` missing, pointing nowhere, holding a NUL byte; the newest checkpoint damaged;
# metadata.json edited.
"$bin" train "${good[@]}" train.train_iter=3 train.checkpointer.period=1 train.checkpointer.max_to_keep=3 \
  "train.output_dir=$work/r" > /dev/null 2>&1 || { echo "FAIL: the run to resume failed"; fail=$((fail + 1)); }
cp -r "$work/r" "$work/r_saved"
reset_run() { rm -rf "$work/r" && cp -r "$work/r_saved" "$work/r"; }
rm "$work/r/checkpoints/latest"
"$bin" train "${good[@]}" train.train_iter=4 train.resume=true "train.output_dir=$work/r" > "$work/out" 2> "$work/err"
if grep -q "from iteration 3" "$work/out" && grep -q "warning: resuming from .*iter_0000003 (.*latest is missing" "$work/err"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: resume without checkpoints/latest:"; cat "$work/err"; grep "^training" "$work/out"
fi
reset_run
printf 'iter_0000003\0\n' > "$work/r/checkpoints/latest"
expect_error "NUL byte in latest" "latest holds 'iter_0000003\\\\x00', not a checkpoint name (iter_NNNNNNN); the newest complete checkpoint there is iter_0000003" \
  "$bin" train "${good[@]}" train.train_iter=4 train.resume=true "train.output_dir=$work/r"
reset_run
python3 - "$work/r/checkpoints/iter_0000003" <<'EOF'
import glob, sys
f = sorted(glob.glob(sys.argv[1] + "/shard_*.safetensors"))[0]
data = bytearray(open(f, "rb").read())
data[-1] ^= 0xFF
open(f, "wb").write(bytes(data))
EOF
expect_error "damaged newest checkpoint" "iter_0000003.*the previous complete checkpoint is iter_0000002: to resume from it, write its name into" \
  "$bin" train "${good[@]}" train.train_iter=4 train.resume=true "train.output_dir=$work/r"
reset_run
sed -i 's/"iter": 3/"iter": 1/' "$work/r/checkpoints/iter_0000003/metadata.json"
expect_error "edited metadata.json" "iter_0000003/metadata.json: its checksum does not match its contents" \
  "$bin" train "${good[@]}" train.train_iter=4 train.resume=true "train.output_dir=$work/r"
# Two runs in one output_dir: the second is refused while the first runs.
reset_run
"$bin" train "${good[@]}" train.train_iter=100000 train.resume=true train.checkpointer.period=0 "train.output_dir=$work/r" \
  > /dev/null 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "^pid $first" "$work/r/.lock" 2>/dev/null && break; sleep 0.1; done
expect_error "a second run in the same output_dir" "train.output_dir '$work/r' is in use by another run ($work/r/.lock is locked by pid $first)" \
  "$bin" train "${good[@]}" train.train_iter=4 train.resume=true "train.output_dir=$work/r"
kill "$first" 2> /dev/null; wait "$first" 2> /dev/null
# ---- Resume and stop (one block). metadata.json deleted from the newest checkpoint: the message
# names the previous complete one, as the other damage messages do.
reset_run
rm "$work/r/checkpoints/iter_0000003/metadata.json"
expect_error "metadata.json deleted" "iter_0000003/metadata.json: missing .*; the previous complete checkpoint is iter_0000002: to resume from it, write its name into $work/r/checkpoints/latest" \
  "$bin" train "${good[@]}" train.train_iter=4 train.resume=true "train.output_dir=$work/r"
# A resume keeps data.seq_length, the global batch and train.seed; a folder that is not there is
# refused (a misspelled path); an empty one starts from step 0 with a line saying so.
reset_run
expect_error "resume with another seq_length" "train.resume: data.seq_length 8 differs from 16 in checkpoint $work/r/checkpoints/iter_0000003: .*set data.seq_length=16" \
  "$bin" train "${good[@]}" data.seq_length=8 train.train_iter=4 train.resume=true "train.output_dir=$work/r"
expect_error "resume with another seed" "train.resume: train.seed 7 differs from 1234 in checkpoint .*set train.seed=1234" \
  "$bin" train "${good[@]}" train.seed=7 train.train_iter=4 train.resume=true "train.output_dir=$work/r"
expect_error "resume with another global batch" "train.resume: train.global_batch_size 16 (train_micro_batch_size 8 x num_accumulation_steps 2 x data_parallel_size 1) differs from 8 in checkpoint .*set train.global_batch_size=8" \
  "$bin" train "${good[@]}" train.num_accumulation_steps=2 train.train_iter=4 train.resume=true "train.output_dir=$work/r"
expect_error "resume of a folder not there" "train.resume: train.output_dir '$work/r_typo' does not exist: there is no run to resume" \
  "$bin" train "${good[@]}" train.resume=true "train.output_dir=$work/r_typo"
[ -e "$work/r_typo" ] && { echo "FAIL: resume created the misspelled folder"; fail=$((fail + 1)); }
mkdir -p "$work/r_empty"
if "$bin" train "${good[@]}" train.resume=true "train.output_dir=$work/r_empty" > /dev/null 2> "$work/err" &&
  [ "$(cat "$work/err")" = "meshflow: train.resume: no checkpoint in $work/r_empty/checkpoints: starting from step 0" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: resume of an empty folder:"; cat "$work/err"
fi
# SIGTERM mid-run: the step ends, its checkpoint is saved, one line, exit 0; train.resume=true then
# logs the losses of an uninterrupted run.
losses_of() { grep -o '"step":[0-9]*\|"loss":[^,}]*' "$1/metrics.jsonl" | cut -d: -f2 | paste - -; }
long=("${good[@]}" train.train_iter=100000 train.log_period=1 train.checkpointer.period=0)
"$bin" train "${long[@]}" "train.output_dir=$work/sig" > /dev/null 2> "$work/err" &
job=$!
for _ in $(seq 600); do [ "$(cat "$work/sig/metrics.jsonl" 2> /dev/null | wc -l)" -ge 3 ] && break; sleep 0.05; done
kill -TERM "$job"
wait "$job"
rc=$?
step=$(sed -n 's/^meshflow: received SIGTERM at step \([0-9]*\): saved checkpoint .*, exiting$/\1/p' "$work/err")
ckpt=$work/sig/checkpoints/iter_$(printf %07d "${step:-0}")
if [ "$rc" -eq 0 ] && [ -n "$step" ] && [ "$(wc -l < "$work/err")" -eq 1 ] && grep -q "saved checkpoint $ckpt, exiting" "$work/err" &&
  [ -f "$ckpt/metadata.json" ]; then
  end=$((step + 3))
  "$bin" train "${long[@]}" train.resume=true train.exit_iter=$end "train.output_dir=$work/sig" > /dev/null 2>&1 &&
    "$bin" train "${long[@]}" train.exit_iter=$end "train.output_dir=$work/sig_ref" > /dev/null 2>&1
  if [ "$(losses_of "$work/sig")" = "$(losses_of "$work/sig_ref")" ] && [ "$(losses_of "$work/sig" | wc -l)" -eq "$end" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: the resume after SIGTERM at step $step logs other losses than the uninterrupted run:"
    diff <(losses_of "$work/sig") <(losses_of "$work/sig_ref") | head -5
  fi
else
  fail=$((fail + 1)); echo "FAIL: SIGTERM mid-run: exit $rc, step '${step}', stderr:"; cat "$work/err"; ls "$work/sig/checkpoints" 2> /dev/null
fi
# ---- eval's result file; preprocess keeps white-space documents and refuses devices; a setting
# after generate's --prompt; report of a metrics.jsonl whose last line is cut.
# eval writes its result in full precision beside the printed line (eval_results.json, --output).
if "$bin" eval "$work/ok/config.yaml" > "$work/eval.out" 2>&1 &&
   "$bin" eval "$work/ok/config.yaml" --output "$work/eval_copy.json" > /dev/null 2>&1 &&
   python3 - "$work/eval.out" "$work/ok/eval_results.json" "$work/eval_copy.json" <<'EOF'
import json, math, re, sys
printed = float(re.search(r"val_loss ([0-9.]+)", open(sys.argv[1]).read()).group(1))
j = json.load(open(sys.argv[2]))
assert abs(j["val_loss"] - printed) <= 5e-5, (j, printed)
assert j["val_loss"] != round(j["val_loss"], 4), j  # the digits the printed line leaves out
assert j["step"] == 2 and j["samples"] > 0 and j["tokens"] == j["samples"] * 16, j
assert abs(j["val_ppl"] - math.exp(j["val_loss"])) <= 1e-12 * j["val_ppl"], j
assert json.load(open(sys.argv[3])) == j
assert "eval results (full precision): " + sys.argv[2] in open(sys.argv[1]).read()
EOF
then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: eval_results.json:"; cat "$work/eval.out"; cat "$work/ok/eval_results.json"
fi
ls -a "$work/ok" | grep -q '\.tmp\.' && { echo "FAIL: eval left a temporary file"; fail=$((fail + 1)); }
# A document of white space is kept (it tokenizes to ids); one of no text is counted as left out.
printf '{"text": "a cat"}\n{"text": "   "}\n{"text": ""}\n' > "$work/ws.jsonl"
"$bin" preprocess --input "$work/ws.jsonl" --output-prefix "$work/ws" --tokenizer byte > "$work/ws.out" 2>&1
if grep -q "2 documents, 10 tokens .*; 1 document left out: they tokenize to no ids$" "$work/ws.out"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: preprocess of a white-space document:"; cat "$work/ws.out"
fi
expect_error "preprocess of a device" "preprocess: /dev/zero is not a regular file (a character device); give a file of text or jsonl" \
  timeout 20 "$bin" preprocess --input /dev/zero --output-prefix "$work/zero" --tokenizer byte
# One text per --prompt: a key=value after it is a setting, a bare word an error, never a prompt.
expect_error "a setting after --prompt" "no checkpoint in $work/nothing_here/checkpoints" \
  "$bin" generate "$work/ok/config.yaml" --prompt hi "train.output_dir=$work/nothing_here" --max-new-tokens 2
expect_error "a second word after --prompt" "config override \`there\` is not key=value" \
  "$bin" generate "$work/ok/config.yaml" --prompt hi there --max-new-tokens 2
# report: a last line cut short (a full disk) is left out with a warning; the report is written.
mkdir -p "$work/cut"
printf '{"step": 1, "loss": 5.5, "mfu": 0.1}\n{"step": 2, "loss": 5.0, "mfu": 0.1}\n{"step": 3, "lo' > "$work/cut/metrics.jsonl"
if "$bin" report "$work/cut" > "$work/report.out" 2> "$work/report.err" && [ -f "$work/cut/report/index.html" ] &&
   grep -q "^meshflow: warning: $work/cut/metrics.jsonl:3: the last line is cut" "$work/report.err"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL: report of a cut metrics.jsonl:"; cat "$work/report.err"
fi

for o in o10 o11 o11z o12 o13 o14; do [ -e "$work/${o}_text_document.bin" ] && { echo "FAIL: $o written after an error"; fail=$((fail + 1)); }; done
for o in o5 o6 o7 o8 launch1; do [ -e "$work/$o" ] && { echo "FAIL: $o written after an error"; fail=$((fail + 1)); }; done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
