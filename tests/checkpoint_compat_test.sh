#!/usr/bin/env bash
# Checkpoints written before a change of the code still load: tests/fixtures/checkpoint_v2_tp2 (a
# tiny GPT-2 checkpointed after step 2 of 4 by an earlier meshflow on 2 processes with tensor
# parallelism 2; see its README) resumed on one process continues the run — its steps 3 and 4 give
# the loss and gradient norm the earlier version logged (expected.json), to 1e-6 relative (one
# process instead of a tp split of 2 sums floats in another order: 4e-8 seen).
# Usage: checkpoint_compat_test.sh MESHFLOW_BINARY SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1
fixture=tests/fixtures/checkpoint_v2_tp2

source tests/tiny_corpus.sh
tiny_corpus "$bin" "$work" 200
mkdir -p "$work/out/checkpoints"
cp -r "$fixture/iter_0000002" "$work/out/checkpoints/"
printf 'iter_0000002' > "$work/out/checkpoints/latest"
"$bin" train configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 \
  "data.data_prefix=$work/c_text_document" model.num_layers=2 model.hidden_size=16 model.num_attention_heads=2 \
  model.ffn_hidden_size=32 model.max_seq_length=16 data.seq_length=15 train.train_micro_batch_size=2 \
  train.global_batch_size=4 train.train_iter=4 train.checkpointer.period=0 train.log_period=1 \
  train.evaluation.enabled=false train.resume=true "train.output_dir=$work/out" > "$work/log" 2>&1 ||
  { echo "FAIL: resuming from the fixture checkpoint:"; cat "$work/log"; exit 1; }
grep -q "from iteration 2" "$work/log" || { echo "FAIL: the run did not resume from iteration 2:"; cat "$work/log"; exit 1; }
python3 - "$fixture/expected.json" "$work/out/metrics.jsonl" <<'PY'
import json, sys
expected = json.load(open(sys.argv[1]))["expected"]
got = {}
for line in open(sys.argv[2]):
    j = json.loads(line)
    if "loss" in j and "step" in j:
        got[j["step"]] = j
bad = 0
for e in expected:
    g = got.get(e["step"])
    if g is None:
        print(f"FAIL: step {e['step']} not logged"); bad = 1; continue
    for key in ("loss", "grad_norm"):
        rel = abs(g[key] - e[key]) / abs(e[key])
        ok = rel <= 1e-6
        print(f"step {e['step']} {key}: {g[key]:.8f} vs {e[key]:.8f} written before (rel {rel:.1e}) {'ok' if ok else 'FAIL'}")
        bad |= not ok
print("PASS" if not bad else "FAILED")
sys.exit(bad)
PY
