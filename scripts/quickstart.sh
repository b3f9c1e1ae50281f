#!/usr/bin/env bash
# Builds meshflow and runs its main job. Until the trainer lands (issue 3) the main job is the
# core benchmark: GEMM and memory-bound kernel rates next to the BLAS and a memory copy, and
# fused attention. Usage: bash scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
./build/bench/meshflow_core_bench
if [ -x build/bench/meshflow_attention_bench ]; then ./build/bench/meshflow_attention_bench; fi
