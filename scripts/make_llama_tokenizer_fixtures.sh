#!/usr/bin/env bash
# Regenerates the reference token ids the tokenizer tests compare every id with:
#   tests/fixtures/hf_bpe_llama3.json      Llama 3's tokenizer.json   } @lenml/tokenizers@3.7.2 (a JavaScript
#   tests/fixtures/hf_bpe_qwen3.json       Qwen3's (Qwen2's) one      } port of Hugging Face's tokenizers)
#   tests/fixtures/sentencepiece_llama2.json  Llama 2's tokenizer.model: llama-tokenizer-js@1.2.2 (its own
#                                          JavaScript BPE over Llama 2's vocabulary, baked into the package)
# for ~45 texts: CJK, emoji (ZWJ sequences, flags, skin tones), code, numbers in several scripts,
# white-space runs, accented Latin, Cyrillic, Greek, Arabic, Thai, Devanagari, special tokens.
# The Hugging Face encoders load the very files scripts/fetch-tokenizers.sh puts in
# data/tokenizers/ (run first, here); each fixture records the SHA-256 of the file it was made
# from. Encoding adds no begin-of-text token, as meshflow's tokenizers do; llama-tokenizer-js adds
# SentencePiece's dummy-prefix space, as the model (add_dummy_prefix) does.
# Needs node + npm and the npm registry; packages go to a temporary directory.
# Usage (from the repository root): bash scripts/make_llama_tokenizer_fixtures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/fetch-tokenizers.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null &&
  npm install --silent --no-audit --no-fund @lenml/tokenizers@3.7.2 llama-tokenizer-js@1.2.2 >/dev/null)
cat > "$tmp/make.mjs" <<'JS'
import fs from 'fs';
import crypto from 'crypto';
import { TokenizerLoader } from '@lenml/tokenizers';
import llamaTokenizer from 'llama-tokenizer-js';
const [root] = process.argv.slice(2);
const texts = [
  "Hello, world! This is Llama's tokenizer.",
  "I'm sure they'll say we've done what you'd expect; it's fine, isn't it? They're OK.",
  "IT'S LOUD: WE'LL SEE, YOU'RE RIGHT, I'D SAY THEY'VE WON, I'M 'S 'T 'Re 'vE.",
  "The year 2024 had 365 days, 12 months and 3.14159 pi; call 555-0123 or +1 (800) 123-4567.",
  "1234567890 12345 1 22 333 4444 55555 0.000001 1e-9 1,000,000 $99.99 50% 3rd 42nd",
  "def add(a, b):\n    return a + b  # sum\n\nprint(add(1, 2))\n",
  "for (int i = 0; i < n; ++i) {\n\tx[i] = y[i] * 2;\n}\n",
  "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
  "<html><body class=\"x\">tags &amp; entities</body></html>",
  "multiple   spaces\tand\ttabs\n\n\nand newlines   \n  trailing   ",
  "  leading spaces, and a single trailing space ",
  "\n\nStarts with newlines\r\nwindows line\r\nend\r\n",
  "a \n b  \n\n  c\t\n\td \u3000 e\u00a0f",
  "   ",
  " ",
  "\n",
  "x",
  "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe se\u00f1or fa\u00e7ade Zo\u00eb \u00c5ngstr\u00f6m",
  "\u0141\u00f3d\u017a, \u010ce\u0161tina, \u0130stanbul, Dvo\u0159\u00e1k, \u0151\u0171, \u0219\u021b",
  "Decomposed: e\u0301 a\u0300 o\u0308 n\u0303 (combining marks after letters)",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u6211\u4eec\u6765\u8bad\u7ec3\u4e00\u4e2a\u6a21\u578b\u3002",
  "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3082\u3042\u308a\u307e\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3002",
  "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4. \uc548\ub155\ud558\uc138\uc694!",
  "Emoji: \ud83d\ude00\ud83d\ude80\ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66 flags \ud83c\uddeb\ud83c\uddf7\ud83c\uddef\ud83c\uddf5!",
  "\ud83c\udff3\ufe0f\u200d\ud83c\udf08 \ud83d\udc69\ud83c\udffe\u200d\ud83d\udcbb 1\ufe0f\u20e3 \u2764\ufe0f\u200d\ud83d\udd25 \ud83e\uddd1\u200d\ud83e\udd1d\u200d\ud83e\uddd1",
  "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u03ba\u03cc\u03c3\u03bc\u03b5 \u2014 \u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0415\u0451\u0436\u0438\u043a.",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0661\u0662\u0663\u0664 \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0967\u0968\u0969",
  "Numbers: \uff11\uff12\uff13 x\u00b2 \u00bd \u2460\u2461\u2462 \u216b \u0f20\u0f21 \ud835\udfd9\ud835\udfda",
  "<|begin_of_text|>Hello<|end_of_text|> and <|eot_id|> in text<|reserved_special_token_5|>",
  "<|endoftext|> and <|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "<s> and </s> are text for SentencePiece; <unk> too.",
  "<|end_of_text|><|end_of_text|>x<|endoftext|><|endoftext|>",
  "<| not a special |> <|begin_of_text <|im_start",
  "URLs: https://example.com/path?query=1&x=y#frag and e-mail foo.bar@baz.org",
  "!!!??? ... --- *** ((( ))) [[[ ]]] {{{ }}} $$$ %%% ^^^ &&& ___ +++ === ~~~ ```",
  "It's 'quoted' and \"double quoted\"; O'Neil's dog's bone; don\u2019t (curly).",
  "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilistic",
  "Mixed123abc abc123 x86_64 __init__ camelCaseName snake_case_name kebab-case-name",
  "Punctuation before letters: .hello ,world ;x \u00bfQu\u00e9? \u00a1Hola! \u201cquoted\u201d \u00abguillemets\u00bb",
  "Q: Why did the chicken cross the road?\n\tA: To get to the other side.\n\t\t-- Anonymous\n",
  "tabs\t\t\tand\t \t mixed  \t\n\t  \n",
  "End with punctuation and newlines...\n\n\n",
  "\u00a0\u00a0nbsp\u2009thin\u2002en\u3000ideographic\u200bzero-width\ufeffbom",
  "Math: \u2200x\u2208\u211d, x\u00b2 \u2265 0; \u222b\u2080\u00b9 f(x)dx \u2248 \u03c0/4 \u2192 \u221e",
];
function sha256(path) { return crypto.createHash('sha256').update(fs.readFileSync(path)).digest('hex'); }
function write(name, meta, encode) {
  const cases = texts.map(text => ({ text, nfc: text.normalize('NFC') === text, ids: Array.from(encode(text)) }));
  const head = JSON.stringify(meta).slice(0, -1);
  fs.writeFileSync(`${root}/tests/fixtures/${name}`,
    head + ',\n"cases": [\n' + cases.map(c => JSON.stringify(c)).join(',\n') + '\n]}\n');
  console.log(`wrote tests/fixtures/${name}: ${cases.length} texts, ${cases.reduce((n, c) => n + c.ids.length, 0)} ids`);
}
for (const [model, name] of [['llama3', 'hf_bpe_llama3.json'], ['qwen3', 'hf_bpe_qwen3.json']]) {
  const dir = `${root}/data/tokenizers/${model}`;
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(`${dir}/tokenizer.json`, 'utf8')),
    tokenizerConfig: JSON.parse(fs.readFileSync(`${dir}/tokenizer_config.json`, 'utf8')),
  });
  write(name, { tokenizer: `data/tokenizers/${model}/tokenizer.json`, sha256: sha256(`${dir}/tokenizer.json`),
                encoder: '@lenml/tokenizers@3.7.2, add_special_tokens false' },
        text => tok.encode(text, { add_special_tokens: false }));
}
const spm = `${root}/data/tokenizers/llama2/tokenizer.model`;
write('sentencepiece_llama2.json', { tokenizer: 'data/tokenizers/llama2/tokenizer.model', sha256: sha256(spm),
                                     encoder: 'llama-tokenizer-js@1.2.2, no BOS, dummy-prefix space' },
      text => llamaTokenizer.encode(text, false, true));
JS
(cd "$tmp" && node make.mjs "$root")
