#!/usr/bin/env bash
# BERT end to end on the corpus the project installs: the fortunes split into sentences and
# tokenized with bert-base-uncased's WordPiece (`meshflow preprocess --split-sentences`), the tiny
# BERT of configs/bert/tiny.yaml pretrained on it (masked LM + next-sentence prediction), then
# fine-tuned as a classifier of which fortune database a fortune comes from
# (configs/bert/tiny_classify.yaml; scripts/make_fortune_classification.sh holds out every 5th
# fortune), and the same classifier trained from a random initialisation for comparison. Prints the
# masked-LM loss before and after pretraining and the held-out accuracies beside the majority class.
# The pretraining reads every fortune's text (no labels), the held-out ones included.
# Usage: bash scripts/bert_example.sh [config overrides for the pretraining run]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -f data/tokenizers/bert/vocab.txt ] || bash scripts/fetch-tokenizers.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target meshflow_cli
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ ! -f data/fortunes_bert_text_sentence.idx ]; then
  mapfile -t corpus < <(bash scripts/prepare_corpus.sh)
  ./build/meshflow preprocess --config configs/bert/tiny.yaml --input "${corpus[@]}" --output-prefix data/fortunes_bert \
    --split-sentences --shuffle-seed 1
fi
[ -f data/fortune_classes/valid.jsonl ] || bash scripts/make_fortune_classification.sh data/fortune_classes
stamp=$(date +%Y%m%d-%H%M%S)
mkdir -p output
pre=output/bert_tiny-$stamp
./build/meshflow train configs/bert/tiny.yaml "train.output_dir=$pre" "$@" | tee "$pre.log"
./build/meshflow train configs/bert/tiny_classify.yaml "model.pretrained=$pre" \
  "train.output_dir=output/bert_tiny_classify-$stamp" | tee "output/bert_tiny_classify-$stamp.log"
./build/meshflow train configs/bert/tiny_classify.yaml "train.output_dir=output/bert_tiny_classify_scratch-$stamp" |
  tee "output/bert_tiny_classify_scratch-$stamp.log"
first=$(grep -m1 -o 'val_mlm_loss [0-9.]*' "$pre.log" | cut -d' ' -f2)
last=$(grep -o 'val_mlm_loss [0-9.]*' "$pre.log" | tail -1 | cut -d' ' -f2)
echo "pretraining: held-out masked-LM loss $first at the first evaluation, $last at the last (ln 30522 = 10.33)"
grep -m1 'majority class' "output/bert_tiny_classify-$stamp.log"
echo "fine-tuned from the pretrained BERT: $(grep -o 'val_accuracy [0-9.]*' "output/bert_tiny_classify-$stamp.log" | tail -1)"
echo "trained from a random initialisation: $(grep -o 'val_accuracy [0-9.]*' "output/bert_tiny_classify_scratch-$stamp.log" | tail -1)"
