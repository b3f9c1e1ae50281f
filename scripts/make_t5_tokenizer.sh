#!/usr/bin/env bash
# Trains a tiny T5-style SentencePiece tokenizer on the project's corpus (Debian's fortune
# databases, listed by scripts/prepare_corpus.sh) into data/tokenizers/t5-tiny/spiece.model
# (ignored by git), with Debian's `spm_train` and T5's conventions: a unigram model, <pad> = 0,
# </s> = 1, <unk> = 2, no <s>, character_coverage 1.0, SentencePiece's default nmt_nfkc
# normaliser; 2000 pieces. Load it with `tokenization.tokenizer=sentencepiece
# tokenization.tokenizer_file=data/tokenizers/t5-tiny tokenization.extra_ids=100` (T5's 100
# sentinels after the 2000 pieces). The tokenizer tests read it (scripts/test.sh runs this first).
#
# Deterministic: the model stores its training options (the input's and the prefix's names too,
# so training runs in a scratch folder on `corpus.txt` with prefix `spiece`), and the unigram
# trainer's sums depend on the thread count (1 and 16 threads give different scores), so
# --num_threads is pinned. Two runs give a byte-identical model (checked on Debian 12:
# sentencepiece 0.1.97-3+b1, fortunes 1:1.99.1-7.3; SHA-256 EXPECTED_SHA below, ~25 s on 2 cores).
#
# Idempotent: does nothing when the model is there and valid — spiece.model.stamp beside it records
# the options, the corpus's and the model's SHA-256, and the model loads with 2000 pieces and
# <pad>, </s>, <unk> first; else trains it again. Needs spm_train / spm_encode / spm_export_vocab
# (Debian's `sentencepiece`; installed through scripts/install-deps.sh when missing, as root).
# Usage (from anywhere): bash scripts/make_t5_tokenizer.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=data/tokenizers/t5-tiny
model=$dest/spiece.model
vocab_size=2000
opts=(--model_type=unigram --vocab_size=$vocab_size --character_coverage=1.0
      --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1 --num_threads=16)
EXPECTED_SHA=7e48df0d42bcca687df4e0c703ae1f16d41b399b8006f769de809c94a0334d16

if ! command -v spm_train >/dev/null || ! command -v spm_export_vocab >/dev/null; then
  bash scripts/install-deps.sh
fi
mapfile -t corpus < <(bash scripts/prepare_corpus.sh)
[ ${#corpus[@]} -gt 0 ] || { echo "make_t5_tokenizer: no corpus files (scripts/prepare_corpus.sh)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The corpus text, one training sentence per line, without the "%" lines between fortunes.
for f in "${corpus[@]}"; do grep -v '^%$' "$f" || true; done > "$tmp/corpus.txt"
corpus_sha=$(sha256sum "$tmp/corpus.txt" | cut -d' ' -f1)

# valid MODEL: loads, 2000 pieces, <pad> </s> <unk> at 0 1 2.
valid() {
  local v
  v=$(spm_export_vocab --model="$1" 2>/dev/null) || return 1
  [ "$(printf '%s\n' "$v" | wc -l)" -eq "$vocab_size" ] &&
    [ "$(printf '%s\n' "$v" | head -n 3 | cut -f1 | tr '\n' ' ')" = "<pad> </s> <unk> " ]
}
stamp() { printf 'options %s\ncorpus %s\nmodel %s\n' "${opts[*]}" "$corpus_sha" "$(sha256sum "$1" | cut -d' ' -f1)"; }

if [ -f "$model" ] && [ -f "$model.stamp" ] && valid "$model" && [ "$(stamp "$model")" = "$(cat "$model.stamp")" ]; then
  exit 0
fi
echo "make_t5_tokenizer: training $model (spm_train, ${#corpus[@]} corpus files, ~25 s)"
(cd "$tmp" && spm_train --input=corpus.txt --model_prefix=spiece "${opts[@]}" --minloglevel=1 > train.log 2>&1) ||
  { cat "$tmp/train.log" >&2; echo "make_t5_tokenizer: spm_train failed" >&2; exit 1; }
valid "$tmp/spiece.model" || { echo "make_t5_tokenizer: spm_train wrote an unexpected model" >&2; exit 1; }
sha=$(sha256sum "$tmp/spiece.model" | cut -d' ' -f1)
if [ "$sha" != "$EXPECTED_SHA" ]; then  # another corpus or sentencepiece version: still a valid model
  echo "make_t5_tokenizer: note: SHA-256 $sha, not the one recorded on Debian 12 ($EXPECTED_SHA)" >&2
fi
mkdir -p "$dest"
cp "$tmp/spiece.model" "$model.part" && mv "$model.part" "$model"
stamp "$model" > "$model.stamp"
echo "make_t5_tokenizer: wrote $model ($vocab_size pieces, SHA-256 $sha)"
