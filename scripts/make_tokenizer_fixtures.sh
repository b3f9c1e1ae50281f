#!/usr/bin/env bash
# Regenerates tests/fixtures/gpt2_bpe.json: GPT-2 token ids of ~20 sample strings produced by
# the reference JavaScript encoder of npm package gpt-3-encoder@1.1.4 (installed into a
# temporary directory). Needs node + npm and the npm registry.
# Usage (from the repository root): bash scripts/make_tokenizer_fixtures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund gpt-3-encoder@1.1.4 >/dev/null)
out="$root/tests/fixtures/gpt2_bpe.json"
mkdir -p "$(dirname "$out")"
cat > "$tmp/make.js" <<'JS'
const { encode, decode } = require('gpt-3-encoder');
const texts = [
  "Hello, world! This is GPT-2's tokenizer.",
  "I'm sure they'll say we've done what you'd expect; it's fine, isn't it? They're OK.",
  "The year 2024 had 365 days, 12 months and 3.14159 pi; call 555-0123 or +1 (800) 123-4567.",
  "def add(a, b):\n    return a + b  # sum\n\nprint(add(1, 2))\n",
  "for (int i = 0; i < n; ++i) { x[i] = y[i] * 2; }",
  "multiple   spaces\tand\ttabs\n\n\nand newlines   \n  trailing   ",
  "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe se\u00f1or fa\u00e7ade Zo\u00eb",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u6211\u4eec\u6765\u8bad\u7ec3\u4e00\u4e2a\u6a21\u578b\u3002 \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3082\u3042\u308a\u307e\u3059\u3002",
  "Emoji: \ud83d\ude00\ud83d\ude80\ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67 flags \ud83c\uddeb\ud83c\uddf7!",
  "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u03ba\u03cc\u03c3\u03bc\u03b5 \u2014 \u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0415\u0451\u0436\u0438\u043a.",
  "Arabic digits \u0661\u0662\u0663 and Devanagari \u0967\u0968\u0969, fullwidth \uff11\uff12\uff13, superscript x\u00b2 \u00bd.",
  "  leading spaces, and a single trailing space ",
  "\n\nStarts with newlines\r\nwindows line\r\nend",
  "<|endoftext|> is just text here; so is <html><body>tags</body></html>.",
  "URLs: https://example.com/path?query=1&x=y#frag and e-mail foo.bar@baz.org",
  "!!!??? ... --- *** ((( ))) [[[ ]]] {{{ }}} $$$ %%% ^^^ &&& ___ +++ === ~~~ ```",
  "It's 'quoted' and \"double quoted\"; O'Neil's dog's bone; 'S 'T uppercase contractions.",
  "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilistic",
  "a\u0301 combining acute, \u00e9 precomposed; \u00c5ngstr\u00f6m, \u0141\u00f3d\u017a, \u010ce\u0161tina, \u0130stanbul",
  "Mixed123abc 42nd 3rd 1st 100km/h 0x1F 1e-9 1,000,000",
  "   ",
  "Q: Why did the chicken cross the road?\n\tA: To get to the other side.\n\t\t-- Anonymous\n",
];
const out = texts.map(text => {
  const ids = encode(text);
  if (decode(ids) !== text) throw new Error('reference encoder does not round-trip: ' + JSON.stringify(text));
  return { text, ids };
});
process.stdout.write('[\n' + out.map(o => JSON.stringify(o)).join(',\n') + '\n]\n');
JS
(cd "$tmp" && node make.js) > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
