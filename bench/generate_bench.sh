#!/usr/bin/env bash
# Text-generation throughput, llama-bench style, meshflow beside PyTorch in one run (the same model
# sizes, random weights, f32, the same thread count): pp512 (prefill) and tg128 (decode through the
# key/value cache), batch 1 and 8, then a table of tokens/s and the ratio meshflow / PyTorch.
#   bash bench/generate_bench.sh [--model gpt2|llama] [--threads N] [--quick]
# Needs the Release build (build/bench/meshflow_generate_bench) and Debian's python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bench/meshflow_generate_bench
[ -x "$bin" ] || { echo "generate_bench.sh: build $bin first (cmake --build build --target meshflow_generate_bench)" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
lscpu | grep -m1 'Model name' >&2 || true
"$bin" "$@" | tee -a "$out"
/usr/bin/python3 bench/generate_torch.py "$@" | tee -a "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {(r["impl"], r["test"], r["batch"]): r for r in rows}
print("| model | test | batch | meshflow tokens/s | PyTorch tokens/s | ratio |")
print("|---|---|---|---|---|---|")
for r in rows:
    if r["impl"] != "meshflow":
        continue
    t = by.get(("pytorch", r["test"], r["batch"]))
    ratio = f"{r['tokens_per_s'] / t['tokens_per_s']:.2f}x" if t else "-"
    print(f"| {r['model']} | {r['test']} | {r['batch']} | {r['tokens_per_s']:.1f} | {t['tokens_per_s'] if t else '-'} | {ratio} |")
PY
