#!/usr/bin/env bash
# GPT-2 small (124M) training throughput, meshflow next to PyTorch in the same run (micro-batch
# 4 x 256, f32, AdamW, 2 threads): scripts/bench_train.sh gpt2.
# Usage: bash scripts/bench_gpt2.sh [layers hidden heads seq micro_batch steps]
exec bash "$(dirname "$0")/bench_train.sh" gpt2 "$@"
