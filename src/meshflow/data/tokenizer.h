// Tokenizers: text <-> token ids. `Tokenizer` is the interface the data pipeline and the
// generation code use; `ByteTokenizer` (ids 0..255 = bytes, 256 = end of document) needs no
// files; `Gpt2BpeTokenizer` (gpt2_bpe.h) is GPT-2's byte-level BPE, `HfBpeTokenizer` (hf_bpe.h)
// byte-level BPE from a Hugging Face tokenizer.json (Llama 3, Qwen2), `SentencePieceTokenizer`
// (sentencepiece.h) a SentencePiece tokenizer.model (Llama 2, Mistral) or spiece.model (T5, with
// its <extra_id_k> sentinels), `WordPieceTokenizer`
// (wordpiece.h) BERT's WordPiece over a vocab.txt. All implementations are
// safe to call from several threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mf {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Any byte string encodes (invalid UTF-8 included); decode(encode(s)) == s (the Hugging Face
  // and SentencePiece tokenizers: for text their normaliser leaves as it is; WordPiece is lossy,
  // its decode(encode(s)) is the normalised text). No begin-of-text token is added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws mf::Error for an id outside [0, vocab_size()). The end-of-document id decodes to
  // its token's text ("<|endoftext|>", "</s>").
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eod_id() const = 0;
  virtual std::string name() const = 0;  // "byte", "gpt2-bpe", "hf-bpe", "sentencepiece", "wordpiece"

  // The id of the vocabulary entry spelled exactly `token` ("[CLS]", "##ing"; byte-level BPE:
  // the vocab.json spelling, "Ġthe", or an added token's text "<mask>"; SentencePiece: the piece,
  // "▁the"); nullopt when the vocabulary has no such entry. Default: nullopt (no vocabulary).
  virtual std::optional<int32_t> token_to_id(std::string_view token) const { return std::nullopt; }
  // The vocabulary entry of `id`, spelled as token_to_id takes it (token_to_id(id_to_token(i))
  // == i for the tokenizers that implement both). Default: decode({id}). Throws mf::Error for an
  // id outside [0, vocab_size()).
  virtual std::string id_to_token(int32_t id) const { return decode(std::span<const int32_t>(&id, 1)); }
};

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kEod = 256;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return 257; }
  int32_t eod_id() const override { return kEod; }
  std::string name() const override { return "byte"; }
};

// "byte" -> ByteTokenizer; "gpt2" / "gpt2-bpe" / "gpt2_bpe" -> Gpt2BpeTokenizer::from_directory(path);
// "hf_bpe" -> HfBpeTokenizer from `path`, a tokenizer.json or a folder holding one;
// "sentencepiece" -> SentencePieceTokenizer from `path`, a SentencePiece model or a folder
// holding tokenizer.model (Llama 2), else spiece.model (T5), with `extra_ids` sentinels (T5: 100);
// "wordpiece" -> WordPieceTokenizer from `path`, a BERT vocab.txt or a folder holding one,
// lower-casing and stripping accents when `lower_case` (the other kinds ignore it).
// `eod_token` (those three kinds): the end-of-document token's text, "" for the kind's default.
// Throws naming the kind when it is unknown, the path when it holds no such file, and when
// `extra_ids` is not 0 for a kind other than sentencepiece.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& path = "",
                                          const std::string& eod_token = "", bool lower_case = true,
                                          int64_t extra_ids = 0);

}  // namespace mf
