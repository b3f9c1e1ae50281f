#!/usr/bin/env bash
# T5 end to end on the corpus the project installs: a SentencePiece model trained on the fortunes
# with Debian's spm_train (scripts/make_t5_tokenizer.sh, plus T5's 100 sentinels), the fortunes
# split into sentences and tokenized with it (`meshflow preprocess --split-sentences`), and the tiny
# T5 v1.1 of configs/t5/tiny.yaml pretrained on span corruption (15% of the tokens in spans of mean
# length 3). Prints the held-out loss at the first and the last evaluation.
# Usage: bash scripts/t5_example.sh [config overrides]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/make_t5_tokenizer.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target meshflow_cli
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ ! -f data/fortunes_t5_text_sentence.idx ]; then
  mapfile -t corpus < <(bash scripts/prepare_corpus.sh)
  ./build/meshflow preprocess --config configs/t5/tiny.yaml --input "${corpus[@]}" --output-prefix data/fortunes_t5 \
    --split-sentences --shuffle-seed 1
fi
out=output/t5_tiny-$(date +%Y%m%d-%H%M%S)
mkdir -p output
./build/meshflow train configs/t5/tiny.yaml "train.output_dir=$out" "$@" | tee "$out.log"
first=$(grep -m1 -o 'val_loss [0-9.]*' "$out.log" | cut -d' ' -f2)
last=$(grep -o 'val_loss [0-9.]*' "$out.log" | tail -1 | cut -d' ' -f2)
echo "span corruption: held-out loss $first at the first evaluation, $last at the last (ln 2100 = 7.65)"
