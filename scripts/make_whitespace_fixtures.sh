#!/usr/bin/env bash
# Regenerates tests/fixtures/unicode_whitespace.json: the reference token ids of ~190 texts built
# around every Unicode White_Space code point (U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A,
# 2028, 2029, 202F, 205F, 3000), the look-alikes that are not White_Space (U+FEFF, U+200B, U+180E,
# U+001C-001F), each after a space, between letters, doubled, at the start and at the end of a
# text, and in mixed runs with newlines; for five tokenizers, each from an independent encoder:
#   llama3, qwen3  data/tokenizers/*/tokenizer.json through @huggingface/transformers@4.3.2
#                  (transformers.js; it rewrites the tokenizer.json regex's \s to \p{White_Space},
#                  as Hugging Face's Oniguruma-based tokenizers match it)
#   bert           bert-base-uncased (data/tokenizers/bert/vocab.txt) written as its tokenizer.json
#                  (BertNormalizer, BertPreTokenizer, WordPiece) through transformers.js
#   llama2         data/tokenizers/llama2/tokenizer.model's vocabulary through
#                  llama-tokenizer-js@1.2.2 (no BOS, SentencePiece's dummy-prefix space)
#   gpt2           gpt-3-encoder@1.1.4. Its regex is JavaScript's, whose \s differs from the \s of
#                  the Python `regex` package that OpenAI's encoder uses (that \s is exactly
#                  White_Space: U+0085 is in it, U+FEFF and U+001C-001F are not) only in U+0085 and
#                  U+FEFF. Texts with neither are gpt-3-encoder's encode(); for the others the text is
#                  split with OpenAI's pattern in which \s is \p{White_Space} (the `regex` package's
#                  definition) and each piece is BPE-encoded by gpt-3-encoder (when its own regex
#                  leaves the piece whole) or else by transformers.js's BPE over GPT-2's
#                  encoder.json / vocab.bpe with no regex; each case's "ref" says which.
# Encoding adds no special tokens. Needs node + npm and the npm registry (packages go to a temporary
# directory, installed without their install scripts: transformers.js's ONNX runtime is not needed).
# Usage (from the repository root): bash scripts/make_whitespace_fixtures.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/fetch-tokenizers.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null &&
  npm install --silent --no-audit --no-fund --ignore-scripts @huggingface/transformers@4.3.2 gpt-3-encoder@1.1.4 \
    llama-tokenizer-js@1.2.2 >/dev/null)
cat > "$tmp/make.mjs" <<'JS'
import fs from 'fs';
import crypto from 'crypto';
import { createRequire } from 'module';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import llamaTokenizer from 'llama-tokenizer-js';
const require = createRequire(import.meta.url);
const gpt3 = require('gpt-3-encoder');
const [root] = process.argv.slice(2);
const data = `${root}/data/tokenizers`;
const readJson = path => JSON.parse(fs.readFileSync(path, 'utf8'));
const sha256 = path => crypto.createHash('sha256').update(fs.readFileSync(path)).digest('hex');

// ---- texts
const range = (a, b) => Array.from({ length: b - a + 1 }, (_, k) => a + k);
const whiteSpace = [...range(0x09, 0x0D), 0x20, 0x85, 0xA0, 0x1680, ...range(0x2000, 0x200A), 0x2028, 0x2029,
                    0x202F, 0x205F, 0x3000];
const notWhiteSpace = [0xFEFF, 0x200B, 0x180E, ...range(0x1C, 0x1F)];
for (const cp of whiteSpace) if (!/^\p{White_Space}$/u.test(String.fromCodePoint(cp))) throw new Error(cp);
for (const cp of notWhiteSpace) if (/^\p{White_Space}$/u.test(String.fromCodePoint(cp))) throw new Error(cp);
if (whiteSpace.length !== 25) throw new Error('expected the 25 White_Space code points');
const texts = [];
for (const cp of [...whiteSpace, ...notWhiteSpace]) {
  const c = String.fromCodePoint(cp);
  texts.push(`x ${c}y`, `a${c}b`, `x${c}${c}y`, `${c}start`, `end${c}`, `1${c} 2.${c}\n!`);
}
const all = String.fromCodePoint(...whiteSpace);
const alike = String.fromCodePoint(...notWhiteSpace);
texts.push(
  `x${all}y`, `${all}start`, `end${all}`, all, `x ${alike} y`, `${alike}x${alike}`,
  'x\u3000\u3000y', 'a\u2028b', 'x \u0085y', 'x \ufeffy', '\u0085', '\ufeff', '\ufeff\ufeffx', 'x\u200b\u200b y',
  'x\u0085\ny', 'x\n\u0085y', 'x \u2028\ny', 'x\u2029\r\n\u2029y', ' \n\u0085\r\n y', 'x \u0085\u3000\u2028 y',
  'word\u00a0\u00a0 word', '\u205f\u205f', 'tab\t\u000b\u000c\r\nend', "it's\u2009'll\u00a0'd", 'caf\u00e9\u3000na\u00efve',
  '\u4f60\u3000\u597d\u2028\u4e16\u0085\u754c', 'x\ufeff\u0085\u00a0\ufeffy', '\u3000\u3000', '\u0085\u0085\u0085 ',
);

// ---- encoders
const hf = dir => new PreTrainedTokenizer(readJson(`${data}/${dir}/tokenizer.json`),
                                          readJson(`${data}/${dir}/tokenizer_config.json`));
const bpeJson = (vocab, merges, preTokenizer) => ({
  version: '1.0', added_tokens: [], normalizer: null, pre_tokenizer: preTokenizer, post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
           fuse_unk: false, byte_fallback: false, vocab, merges },
});
function bertTokenizer() {
  const lines = fs.readFileSync(`${data}/bert/vocab.txt`, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const vocab = {};
  lines.forEach((t, i) => { vocab[t] = i; });
  const specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map(t => ({
    id: vocab[t], content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  const json = {
    version: '1.0', added_tokens: specials, post_processor: null,
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null,
                  lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100,
             vocab },
  };
  return new PreTrainedTokenizer(json, { do_lower_case: true, model_max_length: 512 });
}
function gpt2Encoder() {
  const dir = `${root}/data/gpt2`;
  const vocab = readJson(`${dir}/encoder.json`);
  const merges = fs.readFileSync(`${dir}/vocab.bpe`, 'utf8').split('\n').slice(1).filter(l => l.length > 0);
  const noRegex = new PreTrainedTokenizer(
    bpeJson(vocab, merges, { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }), {});
  const jsPattern = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;
  const pyPattern = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;
  return text => {
    if (!/[\u0085\ufeff]/u.test(text)) return { ids: gpt3.encode(text), ref: 'gpt-3-encoder' };
    const ids = [];
    const refs = new Set();
    for (const piece of text.match(pyPattern)) {
      const js = piece.match(jsPattern);
      if (js.length === 1 && js[0] === piece) {
        ids.push(...gpt3.encode(piece));
        refs.add('gpt-3-encoder BPE');
      } else {
        ids.push(...noRegex.encode(piece, { add_special_tokens: false }));
        refs.add('transformers.js BPE');
      }
    }
    return { ids, ref: `White_Space split, ${[...refs].sort().join(' + ')} per piece` };
  };
}

const out = {
  texts: texts.length,
  gpt2: { tokenizer: 'data/gpt2/encoder.json', sha256: sha256(`${root}/data/gpt2/encoder.json`),
          encoder: 'gpt-3-encoder@1.1.4 (see "ref")', cases: [] },
  llama3: { tokenizer: 'data/tokenizers/llama3/tokenizer.json', sha256: sha256(`${data}/llama3/tokenizer.json`),
            encoder: '@huggingface/transformers@4.3.2, add_special_tokens false', cases: [] },
  qwen3: { tokenizer: 'data/tokenizers/qwen3/tokenizer.json', sha256: sha256(`${data}/qwen3/tokenizer.json`),
           encoder: '@huggingface/transformers@4.3.2, add_special_tokens false', cases: [] },
  llama2: { tokenizer: 'data/tokenizers/llama2/tokenizer.model', sha256: sha256(`${data}/llama2/tokenizer.model`),
            encoder: 'llama-tokenizer-js@1.2.2, no BOS, dummy-prefix space', cases: [] },
  bert: { tokenizer: 'data/tokenizers/bert/vocab.txt', sha256: sha256(`${data}/bert/vocab.txt`),
          encoder: '@huggingface/transformers@4.3.2, bert-base-uncased tokenizer.json, add_special_tokens false',
          cases: [] },
};
const gpt2 = gpt2Encoder();
const llama3 = hf('llama3'), qwen3 = hf('qwen3'), bert = bertTokenizer();
for (const text of texts) {
  const g = gpt2(text);
  out.gpt2.cases.push({ text, ids: g.ids, ref: g.ref });
  out.llama3.cases.push({ text, ids: llama3.encode(text, { add_special_tokens: false }) });
  out.qwen3.cases.push({ text, ids: qwen3.encode(text, { add_special_tokens: false }) });
  out.llama2.cases.push({ text, ids: llamaTokenizer.encode(text, false, true) });
  out.bert.cases.push({ text, ids: bert.encode(text, { add_special_tokens: false }) });
}
// One case a line, for readable diffs; everything outside printable ASCII written as \\u escapes.
const ascii = v => JSON.stringify(v).replace(/[\u007f-\uffff]/g, ch => '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0'));
let s = `{"texts": ${out.texts}`;
for (const name of ['gpt2', 'llama3', 'qwen3', 'llama2', 'bert']) {
  const { cases, ...meta } = out[name];
  s += `,\n"${name}": ${JSON.stringify(meta).slice(0, -1)}, "cases": [\n` +
       cases.map(ascii).join(',\n') + '\n]}';
}
fs.writeFileSync(`${root}/tests/fixtures/unicode_whitespace.json`, s + '\n}\n');
console.log(`wrote tests/fixtures/unicode_whitespace.json: ${texts.length} texts x 5 tokenizers`);
JS
(cd "$tmp" && node make.mjs "$root")
