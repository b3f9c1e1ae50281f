#!/usr/bin/env bash
# Training throughput of a model, meshflow next to PyTorch in the same run, f32, AdamW, 2 threads:
#   gpt2   GPT-2 small (124M), micro-batch 4 x 256 (bench/gpt2_train_bench.cpp, bench/gpt2_torch.py)
#   llama  a 125M Llama (12 layers, 768 hidden, 12 heads over 4 key/value heads, SwiGLU 2048, the
#          32000-token vocabulary), micro-batch 4 x 256 (bench/llama_train_bench.cpp, llama_torch.py)
#   bert   BERT-base pretraining (masked LM on 15% of the positions + next-sentence prediction,
#          padding), micro-batch 8 x 128 (bench/bert_train_bench.cpp, bench/bert_torch.py)
# PyTorch (Debian's python3-torch) runs at its best settings here: its OpenBLAS on the OpenMP
# runtime with AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX) and ATen's AVX-512 kernels
# (ATEN_CPU_CAPABILITY=avx512).
# Usage: bash scripts/bench_train.sh gpt2|llama|bert [the benchmark's size arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench_train.sh gpt2|llama|bert [sizes]}
shift
case "$model" in gpt2 | llama | bert) ;; *) echo "bench_train.sh: unknown model '$model' (gpt2, llama or bert)"; exit 2 ;; esac
dpkg -s python3-torch >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target "meshflow_${model}_train_bench"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
"./build/bench/meshflow_${model}_train_bench" "$@"
OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 "bench/${model}_torch.py" "$@"
