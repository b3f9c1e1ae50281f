// A SentencePiece model (`tokenizer.model`: Llama 2, Mistral) through Debian's libsentencepiece.
//
// encode() is the model's own encoding (its normaliser, the dummy-prefix space, byte fallback)
// and adds no begin-of-sentence token — Llama 2 / Mistral's <s> is a prompt convention, and
// `meshflow preprocess` separates documents with the end-of-document token only. Control
// symbols (<s>, </s>) in the text are encoded as text, as SentencePiece does. decode() writes a
// control id as its piece text ("</s>") and decodes the ids between them with SentencePiece,
// which drops the dummy-prefix space at the start of each such run. decode(encode(s)) == s for
// valid UTF-8 that the model's normaliser leaves unchanged (Llama 2's is the identity); invalid
// UTF-8 bytes become U+FFFD.
//
// End of document: the piece `eod_token` when given, else the model's eos (`</s>`).
#pragma once
#include <memory>
#include <string>

#include "meshflow/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mf {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Throws mf::Error naming the file when it is missing or not a SentencePiece model.
  static SentencePieceTokenizer from_file(const std::string& path, const std::string& eod_token = "");

  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t eod_id() const override { return eod_id_; }
  std::string name() const override { return "sentencepiece"; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;

  int32_t bos_id() const;  // the model's <s>, -1 if it has none
  // The id of a piece (e.g. "▁the", "</s>"); -1 if it is not in the model.
  int32_t piece_id(const std::string& piece) const;

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  int64_t vocab_size_ = 0;
  int32_t eod_id_ = -1;
};

}  // namespace mf
