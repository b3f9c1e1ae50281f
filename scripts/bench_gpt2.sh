#!/usr/bin/env bash
# GPT-2 small (124M) training throughput, meshflow next to PyTorch in the same run: micro-batch
# 4 x 256, f32, AdamW, 2 threads. PyTorch (Debian's python3-torch) runs at its best settings
# here: its OpenBLAS on the OpenMP runtime with AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX)
# and ATen's AVX-512 kernels (ATEN_CPU_CAPABILITY=avx512).
# Usage: bash scripts/bench_gpt2.sh [layers hidden heads seq micro_batch steps]
set -euo pipefail
cd "$(dirname "$0")/.."
dpkg -s python3-torch >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target meshflow_gpt2_train_bench
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
./build/bench/meshflow_gpt2_train_bench "$@"
OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 bench/gpt2_torch.py "$@"
