#!/usr/bin/env bash
# A labelled sequence-classification task from the fortune databases (scripts/prepare_corpus.sh,
# which installs them when missing): which database did a fortune come from? Four classes, the
# label being the index in this order: computers, definitions, politics, songs-poems.
#
#   bash scripts/make_fortune_classification.sh OUTDIR
#
# writes OUTDIR/train.jsonl and OUTDIR/valid.jsonl, one {"text": "...", "label": N} per line
# (what mf::ClassificationDataset reads), and OUTDIR/labels.txt (the class names, one a line),
# then prints the examples per class of each file and the majority-class share of valid.
#
# An entry is the text between lines holding only "%", with leading and trailing white space
# removed; empty entries are dropped. A text found in more than one database is dropped (its
# label is ambiguous); a text repeated within one database is kept once. Of the entries kept,
# every 5th of each database (the 5th, 10th, ...) goes to valid, the others to train: the same
# split on every run. Texts are JSON-escaped byte by byte: '"' and '\' and the control
# characters are escaped, valid UTF-8 is copied, and a byte that is not part of valid UTF-8 is
# read as Latin-1 (written \u00XX), so every line is valid JSON. Needs only bash and POSIX awk.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
classes=(computers definitions politics songs-poems)

corpus=$(bash "$(dirname "$0")/prepare_corpus.sh")
files=()
for c in "${classes[@]}"; do
  f=$(printf '%s\n' "$corpus" | awk -v name="$c" '{ n = split($0, p, "/"); if (p[n] == name) { print; exit } }')
  if [ -z "$f" ] || [ ! -r "$f" ]; then
    echo "$0: the fortune database '$c' is missing (scripts/prepare_corpus.sh lists: $(printf '%s ' $corpus))" >&2
    exit 1
  fi
  files+=("$f")
done

mkdir -p "$out"
tmp=$(mktemp -d "$out/.make_fortune_classification.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' "${classes[@]}" > "$tmp/labels.txt"
: > "$tmp/train.jsonl"
: > "$tmp/valid.jsonl"

# Bytes, not characters: C locale. Arguments: the databases in label order.
LC_ALL=C awk -v train="$tmp/train.jsonl" -v valid="$tmp/valid.jsonl" -v names="${classes[*]}" '
function flush(  t) {
  t = entry
  sub(/^[ \t\r\n\f\v]+/, "", t)
  sub(/[ \t\r\n\f\v]+$/, "", t)
  if (t != "") { ++n; text[n] = t; label[n] = cls }
  entry = ""; started = 0
}
# JSON string body of the bytes of s.
function escape(s,   r, i, len, c, b, b1, b2, b3, need, lo, hi) {
  r = ""; len = length(s); i = 1
  while (i <= len) {
    c = substr(s, i, 1)
    b = (c in ord) ? ord[c] : -1
    if (b < 0) { i++; continue }  # a NUL byte (awk strings cannot hold one): dropped
    if (b < 128) {
      if (c == "\"") r = r "\\\""
      else if (c == "\\") r = r "\\\\"
      else if (c == "\n") r = r "\\n"
      else if (c == "\t") r = r "\\t"
      else if (c == "\r") r = r "\\r"
      else if (b < 32 || b == 127) r = r sprintf("\\u%04x", b)
      else r = r c
      i++; continue
    }
    # A UTF-8 sequence: lead byte, then need continuation bytes, the first in [lo, hi].
    need = 0; lo = 128; hi = 191
    if (b >= 194 && b <= 223) need = 1
    else if (b >= 224 && b <= 239) { need = 2; if (b == 224) lo = 160; if (b == 237) hi = 159 }
    else if (b >= 240 && b <= 244) { need = 3; if (b == 240) lo = 144; if (b == 244) hi = 143 }
    if (need > 0 && i + need <= len) {
      b1 = ord[substr(s, i + 1, 1)]; b2 = need >= 2 ? ord[substr(s, i + 2, 1)] : 128
      b3 = need >= 3 ? ord[substr(s, i + 3, 1)] : 128
      if (b1 >= lo && b1 <= hi && b2 >= 128 && b2 <= 191 && b3 >= 128 && b3 <= 191) {
        r = r substr(s, i, need + 1); i += need + 1; continue
      }
    }
    r = r sprintf("\\u%04x", b)  # not UTF-8: the Latin-1 character of the byte
    i++
  }
  return r
}
BEGIN {
  for (i = 1; i < 256; i++) ord[sprintf("%c", i)] = i
  nclass = split(names, name, " ")
  cls = -1; n = 0; entry = ""; started = 0
}
FNR == 1 {  # a new database: its label is its place among the arguments (an empty file has no lines)
  if (cls >= 0) flush()
  for (i = 1; i < ARGC; i++) if (ARGV[i] == FILENAME) cls = i - 1
}
{
  line = $0
  sub(/\r$/, "", line)
  if (line == "%") { flush(); next }
  entry = started ? entry "\n" $0 : $0
  started = 1
}
END {
  if (cls >= 0) flush()
  # Which databases hold each text.
  for (k = 1; k <= n; k++) {
    t = text[k]
    if (!(t in first)) first[t] = label[k]
    else if (first[t] != label[k]) ambiguous[t] = 1
  }
  for (k = 1; k <= n; k++) {
    t = text[k]; c = label[k]
    if ((t in ambiguous) || (t in done)) { dropped[c]++; continue }
    done[t] = 1
    kept[c]++
    line = "{\"text\": \"" escape(t) "\", \"label\": " c "}"
    if (kept[c] % 5 == 0) { print line > valid; nvalid[c]++ } else { print line > train; ntrain[c]++ }
  }
  close(train); close(valid)
  printf "%-12s %6s %6s %8s\n", "class", "train", "valid", "dropped"
  best = 0
  for (c = 0; c < nclass; c++) {
    printf "%-12s %6d %6d %8d\n", name[c + 1], ntrain[c], nvalid[c], dropped[c]
    tt += ntrain[c]; tv += nvalid[c]; td += dropped[c]
    if (nvalid[c] > nvalid[best]) best = c
  }
  printf "%-12s %6d %6d %8d\n", "total", tt, tv, td
  printf "valid majority-class share: %.4f (%s)\n", (tv > 0 ? nvalid[best] / tv : 0), name[best + 1]
}' "${files[@]}"

for f in train.jsonl valid.jsonl labels.txt; do mv -f "$tmp/$f" "$out/$f"; done
echo "wrote $out/train.jsonl, $out/valid.jsonl, $out/labels.txt"
