#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU (under 8 minutes on one H200):
#   1. builds meshflow with the CUDA backend for that GPU's architecture (Release, Ninja);
#   2. runs the CUDA tests: every op's CPU/GPU parity (ctest -L cuda) and the small GPT's losses
#      on one GPU against the CPU over 20 steps;
#   3. runs the GPT-2 benchmark: meshflow vs PyTorch eager vs torch.compile, GPT-2 124M bf16,
#      micro-batch 16 x 1024, then meshflow on GPT-2 1.5B.
# Missing C++ dependencies are taken from .gpudeps/*.deb (scripts/gpu-deps.sh fetches them) and
# unpacked under /tmp/mfdeps. Logs go to $OUT (when set) or output/gpu-check/.
# Usage: bash scripts/gpu-check.sh [quick]   (quick: tests only, no benchmark)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/output/gpu-check}
mkdir -p "$out"
t_start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t_start ))s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -2

# ---- dependencies
deps=/tmp/mfdeps
extra=()
if [ ! -f /usr/include/dnnl.h ] && [ -d .gpudeps ]; then
  stamp "unpacking $(ls .gpudeps/*.deb | wc -l) packages from .gpudeps into $deps"
  mkdir -p $deps
  for f in .gpudeps/*.deb; do dpkg-deb -x "$f" $deps 2>/dev/null || dpkg -x "$f" $deps; done
  # Links to absolute paths (libz.so -> /lib/...) point into the unpacked tree instead.
  find $deps -type l | while read -r l; do
    t=$(readlink "$l")
    case "$t" in /*) [ -e "$deps$t" ] && ln -sfn "$deps$t" "$l" ;; esac
  done
  # Debian's alternatives links are not made by dpkg -x: the OpenMP OpenBLAS serves as libopenblas.
  ln -sf openblas-openmp/libopenblas.so.0 $deps/usr/lib/x86_64-linux-gnu/libopenblas.so.0 2>/dev/null || true
  export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-openmp:${LD_LIBRARY_PATH:-}
  extra+=(-DMESHFLOW_DEPS_ROOT=$deps)
fi
command -v mpicxx >/dev/null || extra+=(-DMESHFLOW_WITH_MPI=OFF)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}

# ---- build
stamp "configure (sm_$arch)"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMESHFLOW_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=${arch}-real "${extra[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
stamp "build"
cmake --build build-gpu -j "$(nproc)" --target meshflow_cli meshflow_cuda_tests meshflow_gpu_gpt2_bench \
  >"$out/build.log" 2>&1 || { grep -E "error|Error" -A3 "$out/build.log" | head -60; exit 1; }

# ---- tests
rc=0
stamp "CUDA parity tests"
./build-gpu/tests/meshflow_cuda_tests --gtest_brief=1 2>&1 | tee "$out/parity.log" | grep -vE "^\[       OK|^\[ RUN" | tail -60
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
grep -E "^\[  (PASSED|FAILED)|tests ran" "$out/parity.log" | head -5
stamp "small GPT: one GPU vs CPU, 20 steps"
bash tests/gpu_train_parity_test.sh build-gpu/meshflow "$root" 2>&1 | tee "$out/train_parity.log" | tail -15
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
[ "${1:-}" = quick ] && { stamp "done (quick), rc=$rc"; exit $rc; }

# ---- benchmark
stamp "benchmark: GPT-2 124M bf16, micro-batch 16 x 1024"
bash bench/gpu_gpt2_bench.sh build-gpu 2>&1 | tee "$out/bench.log"
stamp "done, rc=$rc"
exit $rc
