#!/usr/bin/env bash
# GPT-2 training on one GPU, meshflow next to PyTorch (eager and torch.compile) in one run:
# GPT-2 124M, bf16, micro-batch 16 x 1024 (MESHFLOW_BENCH_MB to change), 20 timed steps after 3
# warm-up steps; then meshflow alone on GPT-2 1.5B (48 layers, hidden 1600, 25 heads).
# Prints tokens/s, MFU against the chip's dense bf16 peak and peak memory per run, then a table.
# Usage: bash bench/gpu_gpt2_bench.sh [build-dir]   (the build needs MESHFLOW_WITH_CUDA)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
mb=${MESHFLOW_BENCH_MB:-16}
py=$(command -v python3)
results=()
run() {  # label, command...
  local label=$1
  shift
  echo "---- $label"
  local line
  line=$(timeout 240 "$@" 2>&1 | tee /dev/stderr | grep '^RESULT' | tail -1)
  results+=("$label|${line#RESULT }")
}
run "meshflow 124M bf16" "$build/bench/meshflow_gpu_gpt2_bench" 12 768 12 1024 "$mb" 20 bf16
run "PyTorch eager 124M" "$py" bench/gpt2_torch_gpu.py 12 768 12 1024 "$mb" 20
run "torch.compile 124M" "$py" bench/gpt2_torch_gpu.py 12 768 12 1024 "$mb" 20 --compile
run "meshflow 1.5B bf16" "$build/bench/meshflow_gpu_gpt2_bench" 48 1600 25 1024 "${MESHFLOW_BENCH_MB_XL:-8}" 6 bf16
echo
echo "| run | result |"
echo "|---|---|"
for r in "${results[@]}"; do echo "| ${r%%|*} | ${r#*|} |"; done
