#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, AddressSanitizer + UBSan + LeakSanitizer; build
# dir build-fuzz) and runs each, one after the other, from a scratch copy of its seed corpus
# (fuzz/corpus/<target>; new inputs never land in the repository). Fails on any crash, leak,
# timeout or memory blow-up; the input that did it is kept in build-fuzz/artifacts/<target>/.
# Usage: bash scripts/fuzz.sh [--short | SECONDS] [--runs N] [TARGET...]
#   --short     15 s per target (.ci/run's pass)
#   SECONDS     at most that long per target (default 60; with --runs, a cap)
#   --runs N    N executions per target; the long pass is --runs 1000000 (each target's
#               "Done N runs in S second(s)" is printed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
runs=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --short) seconds=15 ;;
    --runs) runs=(-runs="$2"); seconds=${seconds_set:-0}; shift ;;
    [0-9]*) seconds=$1; seconds_set=$1 ;;
    -*) echo "fuzz.sh: unknown option $1"; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
limit=("${runs[@]}")
[ "$seconds" = 0 ] || limit+=(-max_total_time="$seconds")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors_header checkpoint_metadata indexed_dataset config gpt2_bpe hf_bpe
                                     wordpiece preprocess_jsonl completion_request)
bash scripts/install-deps.sh  # clang, libclang-rt-14-dev (libFuzzer), llvm (symbolizer)
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
cmake -S . -B build-fuzz -G Ninja -DMESHFLOW_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-fuzz -j "${FUZZ_BUILD_JOBS:-$(nproc)}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
summary=()
failed=0
for t in "${targets[@]}"; do
  bin=build-fuzz/fuzz/${t}_fuzz
  [ -x "$bin" ] || { echo "fuzz.sh: no target $t"; exit 2; }
  mkdir -p "$scratch/$t" "build-fuzz/artifacts/$t"
  cp -r "fuzz/corpus/$t" "$scratch/$t/corpus"
  echo "== fuzz $t (${limit[*]})"
  # -rss_limit_mb / -malloc_limit_mb: a parser that asks for gigabytes on a small input is a bug.
  if "$bin" "${limit[@]}" -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=8192 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/artifacts/$t/" "$scratch/$t/corpus" >"$scratch/$t/log" 2>&1; then
    done_line=$(grep -E '^Done [0-9]+ runs' "$scratch/$t/log" | tail -1)
    [ -n "$done_line" ] || done_line="$(grep -E 'stat::number_of_executed_units' "$scratch/$t/log" | awk '{print "Done", $2, "runs"}')"
    summary+=("$t: $done_line")
    echo "$t: $done_line"
  else
    tail -n 60 "$scratch/$t/log"
    summary+=("$t: FAILED (input kept in build-fuzz/artifacts/$t/)")
    failed=1
  fi
done
printf '%s\n' "${summary[@]}"
exit $failed
