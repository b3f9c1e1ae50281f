#!/usr/bin/env bash
# The main job: build meshflow, tokenize the corpus (Debian's fortune databases, installed by
# scripts/prepare_corpus.sh) into a Megatron indexed dataset, and train the tiny GPT-2 of
# configs/gpt2/tiny.yaml on it. Each run writes to a fresh output/gpt2_tiny-<time> folder
# (config.yaml, metrics.jsonl, tensorboard/, checkpoints/). Extra arguments are config
# overrides, e.g. `bash scripts/quickstart.sh train.train_iter=100`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target meshflow_cli
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
if [ ! -f data/fortunes_text_document.idx ]; then
  mapfile -t corpus < <(bash scripts/prepare_corpus.sh)
  ./build/meshflow preprocess --input "${corpus[@]}" --output-prefix data/fortunes \
    --vocab-file data/gpt2/encoder.json --merges-file data/gpt2/vocab.bpe --shuffle-seed 1
fi
./build/meshflow train configs/gpt2/tiny.yaml "train.output_dir=output/gpt2_tiny-$(date +%Y%m%d-%H%M%S)" "$@"
