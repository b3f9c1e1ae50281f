#!/usr/bin/env bash
# The handwritten digits as image class folders for a small ViT run: scikit-learn's 1797 8x8
# digits (Debian's python3-sklearn ships them as digits.csv.gz; installed when missing, as root)
# written by scripts/make_digits.py to data/digits/{train,valid}/<digit>/<n>.png — 8x8 grey PNGs,
# values 0..16 scaled to 0..255, every 5th image held out (1438 train, 359 valid). The pipeline
# resizes them to model.image_size. Idempotent: an existing complete data/digits is kept; a new
# one is built beside it and renamed into place. data/digits/ is ignored by git.
#   bash scripts/make_digits.sh [OUT_DIR]      # default data/digits
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-data/digits}
csv=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
if [ ! -f "$csv" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "make_digits.sh: $csv is missing (package python3-sklearn); run as root to install it" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-sklearn >/dev/null
fi
if [ -f "$out/.complete" ]; then
  echo "make_digits.sh: $out is already there ($(cat "$out/.complete"))"
  exit 0
fi
tmp="$out.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
python3 scripts/make_digits.py "$csv" "$tmp" > "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out: $(cat "$out/.complete")"
