// Reference ids for Llama 2's tokenizer.json (data/tokenizers/llama2/tokenizer.json, from
// scripts/fetch-tokenizers.sh) from Hugging Face's transformers.js: prints the fixture
// tests/fixtures/hf_bpe_llama2.json (run by scripts/make_hf_llama2_fixture.sh, which installs
// the package). The texts: those of tests/fixtures/sentencepiece_llama2.json (the same model's
// tokenizer.model against llama-tokenizer-js) and more that need byte fallback (characters
// outside the vocabulary), runs of spaces at the start, middle and end, newlines, the special
// tokens as text, a long word. Each case: the text, its ids (no begin-of-text token), and
// transformers.js's decoding of those ids (clean_up_tokenization_spaces false, as Llama 2's
// tokenizer_config.json has it).
// Usage: node hf_llama2_reference.mjs <repository root>
import fs from 'fs';
import crypto from 'crypto';
import { LlamaTokenizer } from '@huggingface/transformers';

const [root] = process.argv.slice(2);
const file = `${root}/data/tokenizers/llama2/tokenizer.json`;
const spm = JSON.parse(fs.readFileSync(`${root}/tests/fixtures/sentencepiece_llama2.json`, 'utf8'));
const texts = spm.cases.map(c => c.text).concat([
  "Rare: \ud835\udd18\ud835\udd2b\ud835\udd26\ud835\udd20\ud835\udd2c\ud835\udd21\ud835\udd22 \ud80c\udc00 \ud83e\udd99 \ua64e \u01c4 \ua9c1\ua9c2 \u2e3b \u9f98 \ud840\udc00 \u9b31",
  "\ud83e\udd99\ud83e\udd99\ud83e\udd99 llamas \ud83e\udd99",
  "   three leading spaces",
  "two trailing spaces  ",
  "a  b   c    d     e",
  "\n",
  "\n\n\nthree newlines first",
  "line\nbreaks \n and\r\nCRLF\n",
  " \t \n mixed white space \u3000\u00a0",
  "Hello",
  " Hello",
  "</s>Hi<s> there </s>",
  "a<unk>b",
  "x".repeat(300),
  "ab".repeat(200) + " " + "\u4f60\u597d".repeat(100),
]);
const tok = new LlamaTokenizer(JSON.parse(fs.readFileSync(file, 'utf8')), { legacy: true });
const cases = texts.map(text => {
  const ids = Array.from(tok.encode(text, { add_special_tokens: false }));
  const decoded = ids.length ? tok.decode(ids, { clean_up_tokenization_spaces: false }) : '';
  return { text, ids, decoded };
});
const sha256 = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
const head = JSON.stringify({ tokenizer: 'data/tokenizers/llama2/tokenizer.json', sha256,
                              encoder: '@huggingface/transformers@4.3.2 LlamaTokenizer, add_special_tokens false' });
process.stdout.write(head.slice(0, -1) + ',\n"cases": [\n' + cases.map(c => JSON.stringify(c)).join(',\n') + '\n]}\n');
